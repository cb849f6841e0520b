/**
 * The REST API's shapes as the console reads them: inferred from the API's own zod schemas
 * (src/api/schemas.ts, type-only imports that esbuild drops), so a field the server adds or
 * renames fails the console's type check instead of drifting.
 */
export type {
  WireError as ErrorInfo,
  WireRunSummary as RunSummary,
  WireStepView as StepView,
  WirePendingKind as PendingKind,
  WirePendingConfirmation as PendingDecision,
  WireRunView as RunView,
  WireRunEvent as RunEvent,
  WireSkill as SkillInfo,
  WirePreview as PreviewResult,
  WireMe as Me,
  WireInboxItem as InboxItem,
  WireApprovalState as ApprovalState,
} from "../../../src/api/schemas.js";
