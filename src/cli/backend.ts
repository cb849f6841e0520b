/**
 * What the run commands need from "the runtime", whether it runs in this process (the embedded
 * database or DATABASE_URL, through openRuntime) or behind a server's REST API (`--url`, see
 * remote.ts). Both hand back the same run views and numbered events, so every command renders
 * the same output in both modes.
 */
import { userInfo } from "node:os";
import type { Acting } from "../kernel/actor.js";
import type { RunEvent } from "../kernel/events.js";
import type { RunStatus } from "../kernel/status.js";
import type { PlanningOutcome } from "../planner/index.js";
import type { OpenedRuntime } from "../runtime/open.js";
import type { ConfirmInput } from "../kernel/decision.js";
import type { RunView } from "../kernel/run-view.js";
import type { SkillManifestEntry } from "../skills/registry.js";
import type { RunPage } from "../store/run-store.js";
import { PgAccessStore } from "../store/pg-access-store.js";
import { defaultDataDir } from "../store/db.js";

/** One execution of a run (started, resumed or cancelled): its events until it settles, then its view. */
export interface Execution {
  runId: string;
  events: AsyncIterable<RunEvent>;
  result: Promise<RunView>;
}

export interface StartInput {
  plan?: unknown;
  request?: string;
  context?: unknown;
  memory?: Record<string, unknown>;
}

export interface Backend {
  readonly kind: "local" | "remote";
  /** Where runs live, for people: "embedded Postgres in .data/pglite", "http://127.0.0.1:8080". */
  readonly where: string;
  /** The workspace the commands act in (remote: the key's; local: --workspace or "local"). */
  readonly workspace: string | undefined;
  start(input: StartInput): Promise<Execution>;
  confirm(runId: string, input: ConfirmInput): Promise<Execution>;
  cancel(runId: string, reason?: string): Promise<Execution>;
  /** Run a failed run again from where it failed (Runtime.redrive / POST …/redrive). */
  redrive(runId: string, overrides?: Record<string, Record<string, unknown>>): Promise<Execution>;
  getRun(runId: string): Promise<RunView>;
  events(runId: string, after?: number): Promise<RunEvent[]>;
  listRuns(q: { statuses?: RunStatus[]; limit: number; cursor?: string }): Promise<RunPage>;
  plan(request: string, opts: { context?: unknown; memory?: Record<string, unknown> }): Promise<PlanningOutcome>;
  skills(): Promise<SkillManifestEntry[]>;
  close(): Promise<void>;
}

/** The workspace local commands act in: the one `npm start` creates a key for, so the console and the API see CLI runs. */
export const LOCAL_WORKSPACE = "local";

export class LocalBackend implements Backend {
  readonly kind = "local" as const;
  readonly where: string;
  private ensured = false;

  constructor(
    readonly opened: OpenedRuntime,
    readonly workspace: string,
  ) {
    this.where =
      opened.db.kind === "embedded"
        ? `embedded Postgres in ${process.env.TOOLCHAIN_DATA_DIR || defaultDataDir()}`
        : "Postgres server (DATABASE_URL)";
  }

  /** The workspace and its QTable "Tasks" table exist before a run references them (as `npm start` does for "local"). */
  private async ensureWorkspace(): Promise<void> {
    if (this.ensured) return;
    this.ensured = true;
    await new PgAccessStore(this.opened.db).ensureWorkspace(this.workspace);
    await this.opened.tables?.ensureWorkspace(this.workspace);
  }

  async start(input: StartInput): Promise<Execution> {
    await this.ensureWorkspace();
    // the operator at this terminal owns the database: a person who may relax confirmations where skills allow it
    const opts = {
      context: input.context ?? {},
      memory: input.memory ?? {},
      workspaceId: this.workspace,
      author: { kind: "person", via: "cli", mayRelaxConfirmation: true } as const,
      requestedBy: terminalUser(),
    };
    const { runtime } = this.opened;
    return input.request !== undefined ? runtime.runRequest(input.request, opts) : runtime.run(input.plan, opts);
  }

  async confirm(runId: string, input: ConfirmInput): Promise<Execution> {
    return this.opened.runtime.confirm(runId, input, terminalUser());
  }

  async cancel(runId: string, reason?: string): Promise<Execution> {
    return this.opened.runtime.cancel(runId, reason, terminalUser());
  }

  async redrive(runId: string, overrides?: Record<string, Record<string, unknown>>): Promise<Execution> {
    return this.opened.runtime.redrive(runId, { overrides }, terminalUser());
  }

  getRun(runId: string): Promise<RunView> {
    return this.opened.runtime.getRun(runId);
  }

  async events(runId: string, after = 0): Promise<RunEvent[]> {
    // the same RUN_NOT_FOUND as the API for an unknown id (the store answers an empty list)
    if (!(await this.opened.runtime.store.getRow(runId))) await this.opened.runtime.getRun(runId);
    return this.opened.runtime.events(runId, after);
  }

  listRuns(q: { statuses?: RunStatus[]; limit: number; cursor?: string }): Promise<RunPage> {
    return this.opened.runtime.store.listRuns({
      workspaceId: this.workspace,
      statuses: q.statuses,
      limit: q.limit,
      cursor: q.cursor,
    });
  }

  plan(request: string, opts: { context?: unknown; memory?: Record<string, unknown> }): Promise<PlanningOutcome> {
    return this.opened.runtime.plan(request, { ...opts, workspaceId: this.workspace });
  }

  async skills(): Promise<SkillManifestEntry[]> {
    return this.opened.runtime.registry.manifest();
  }

  close(): Promise<void> {
    return this.opened.close();
  }
}

/** On a local database the person at the terminal acts (their OS account names them). */
export function terminalUser(): Acting {
  let id = "local";
  try {
    id = userInfo().username || id;
  } catch {
    // no passwd entry (some containers): "local"
  }
  return { by: { kind: "user", id }, via: "cli" };
}
