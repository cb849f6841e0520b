/**
 * What the runtime's concerns in their own files (decide.ts, redrive-run.ts, inspect.ts) use of the
 * Runtime: its store, registry, environment and graph, and the few operations on its drives. The
 * Runtime builds one and passes it; nothing else implements it.
 */
import type { StateSnapshot } from "@langchain/langgraph";
import type { RuntimeEnv } from "../../graphs/env.js";
import type { ApprovalPolicy } from "../kernel/approval-policy.js";
import type { PendingConfirmation } from "../kernel/pending.js";
import type { SkillRegistry } from "../skills/registry.js";
import type { RunRow, RunStore } from "../store/run-store.js";
import type { Drive, DriveInput, Graph } from "./driver.js";
import type { RunHandle } from "./options.js";

export interface RuntimeCore {
  readonly store: RunStore;
  readonly registry: SkillRegistry;
  readonly env: RuntimeEnv;
  readonly owner: string;
  readonly graph: Graph;
  readonly leaseTtlMs: number;
  readonly versionGraceMs: number;
  /** Drives executing in this process, by run id. */
  readonly active: ReadonlyMap<string, Drive>;
  stateOf(runId: string): Promise<StateSnapshot>;
  follow(runId: string): RunHandle;
  handleOf(d: Drive): RunHandle;
  continueRun(runId: string): Promise<RunHandle>;
  drive(runId: string, input: DriveInput): RunHandle;
  policyOf(
    row: Pick<RunRow, "plan" | "workspaceId">,
    pending: Pick<PendingConfirmation, "stepId" | "skillName" | "kind">,
  ): ApprovalPolicy | undefined;
}
