/** The REST API's shapes as the console reads them (see src/api/schemas.ts for the source of truth). */
import type { RollbackStatus, RunStatus, StepStatus } from "../../../src/kernel/status.js";
import type { EventType } from "../../../src/kernel/events.js";

export interface ErrorInfo {
  code: string;
  message: string;
  details?: unknown;
}

export interface RunSummary {
  runId: string;
  status: RunStatus;
  traceId: string;
  planId: string | null;
  goal: string | null;
  stepCount: number;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

export interface StepView {
  stepId: string;
  skillName: string;
  status: StepStatus;
  dependsOn: string[];
  attempts: number;
  input: unknown;
  output: unknown;
  error: ErrorInfo | null;
  startedAt: string | null;
  finishedAt: string | null;
  usedFallback: boolean;
  retrySuppressed: string | null;
  rollback: { status: RollbackStatus; error: ErrorInfo | null } | null;
}

export type PendingKind = "confirmation" | "in_doubt" | "compensation";

export interface PendingDecision {
  stepId: string;
  skillName: string;
  arguments: unknown;
  preview: unknown;
  round?: number;
  inDoubt?: boolean;
  kind?: PendingKind;
}

export interface RunView {
  runId: string;
  status: RunStatus;
  traceId: string;
  plan: { planId?: string; goal?: string; steps: { stepId: string; skillName: string; dependsOn: string[] }[]; rollbackMode?: string; onFailure?: string };
  context: unknown;
  memory: Record<string, unknown>;
  result: { outputs: Record<string, unknown>; memory: Record<string, unknown> } | null;
  error: ErrorInfo | null;
  steps: StepView[];
  pendingConfirmations: PendingDecision[];
  graph: { nodes: { id: string; skillName: string; status?: string }[]; edges: { from: string; to: string }[] };
  createdAt: string;
  updatedAt: string;
}

export interface RunEvent {
  runId: string;
  seq: number;
  type: EventType;
  stepId?: string;
  at: string;
  data: Record<string, unknown>;
}

export interface SkillInfo {
  name: string;
  description: string;
  inputSchema: unknown;
  outputSchema?: unknown;
  sideEffects: "none" | "read" | "write" | "external";
  idempotent: boolean;
  requiresConfirmation: boolean | "conditional";
  compensable: boolean;
}
