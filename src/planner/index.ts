/**
 * The planner: a request (+ context) → a validated ToolChainPlan. The model (when configured)
 * writes a plan; the runtime clamps its execution semantics to the skills' metadata and validates
 * it; a refused plan goes back to the model once with the exact issues; if the model is not
 * configured, fails, times out, answers garbage or stays wrong, the deterministic fallback
 * planner writes the plan. Every surface plans through this (the graph's planner node, the
 * API's /plan, the CLI's `plan`).
 */
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { ToolChainPlan } from "../plan/schema.js";
import { compilePlan, PlanValidationError, type PlanIssue } from "../plan/validate.js";
import type { SkillContext } from "../skills/contract.js";
import type { SkillRegistry } from "../skills/registry.js";
import { clampPlan, type PlanWarning } from "./clamp.js";
import { resolvePlannerConfig, type FallbackReason, type PlannerConfig, type PlannerOptions } from "./config.js";
import { businessCoordinates } from "./coordinates.js";
import { FALLBACK_SKILLS, fallbackPlan, type Understanding } from "./fallback-planner.js";
import { ModelCallError, OpenAiPlanModel, type PlanModel, type TokenUsage } from "./llm-planner.js";
import { buildPrompt, repairMessage, type BusinessCoordinates } from "./prompt.js";

export type { PlanWarning, PlanWarningCode } from "./clamp.js";
export type { FallbackReason, PlannerConfig, PlannerOptions, StructuredMethod } from "./config.js";
export { plannerConfigFromEnv, resolvePlannerConfig } from "./config.js";
export type { PlanModel, TokenUsage, ModelAnswer } from "./llm-planner.js";
export { OpenAiPlanModel, ModelCallError } from "./llm-planner.js";
export type { Understanding } from "./fallback-planner.js";

export type PlannerKind = "llm" | "fallback";

/** Which planner wrote a plan, and why the fallback did when it did. */
export interface PlannerInfo {
  kind: PlannerKind;
  /** The configured model (also when it failed and the fallback wrote the plan). */
  model?: string;
  fallbackReason?: FallbackReason;
  /** What went wrong with the model, for people. */
  fallbackDetail?: string;
}

export interface PlanningInput {
  request: string;
  context?: unknown;
  memory?: Record<string, unknown>;
  /** The workspace's allowlist: the model only sees, and the plan may only use, these skills. */
  allowSkill?: (name: string) => boolean;
  workspaceId?: string;
  /** Aborts the model call (a cancelled run). */
  signal?: AbortSignal;
}

export interface PlanningOutcome {
  /** Validated, defaults applied: ready to run. */
  plan: ToolChainPlan;
  planner: PlannerInfo;
  warnings: PlanWarning[];
  /** Summed over the model calls (absent when the server did not report it or no model ran). */
  usage?: TokenUsage;
  /** 0 or 1: how many times a refused plan went back to the model. */
  repairRounds: number;
  durationMs: number;
  /** The fallback planner's reading of the request. */
  understood?: Understanding;
}

export interface PlannerDeps {
  registry: SkillRegistry;
  config?: PlannerOptions;
  /** A model other than ChatOpenAI (tests, other providers). Default: ChatOpenAI when `config.model` is set. */
  model?: PlanModel;
  now?: () => number;
}

const SCHEMA_READ_TIMEOUT_MS = 5_000;

const addUsage = (a: TokenUsage | undefined, b: TokenUsage | undefined): TokenUsage | undefined =>
  !a ? b : !b ? a : { inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens, totalTokens: a.totalTokens + b.totalTokens };

const issuesOf = (e: unknown): PlanIssue[] => {
  if (e instanceof PlanValidationError) return e.issues;
  const err = e as ToolchainError;
  return [{ code: err?.code ?? ErrorCode.PLAN_INVALID, message: String(err?.message ?? e) }];
};

export class Planner {
  readonly config: PlannerConfig;
  private readonly llm?: PlanModel;
  private readonly now: () => number;

  constructor(private readonly deps: PlannerDeps) {
    this.config = resolvePlannerConfig(deps.config);
    this.now = deps.now ?? Date.now;
    this.llm = deps.model ?? (this.config.model ? new OpenAiPlanModel({ ...this.config, model: this.config.model }) : undefined);
  }

  /** The model that writes plans, if one is configured. */
  get model(): string | undefined {
    return this.llm?.model;
  }

  /** Plan a request. Throws PLANNING_FAILED when no planner can write a valid plan for it. */
  async plan(input: PlanningInput): Promise<PlanningOutcome> {
    const started = this.now();
    const registry = this.deps.registry;
    const usable = (name: string) => registry.has(name) && (!input.allowSkill || input.allowSkill(name));
    const validate = (plan: unknown) => compilePlan(plan, { registry, allowSkill: input.allowSkill, context: input.context ?? {}, memory: input.memory ?? {} }).plan;

    let usage: TokenUsage | undefined;
    let repairRounds = 0;
    let fallback: { reason: FallbackReason; detail: string };
    if (!this.llm) {
      fallback = { reason: "not_configured", detail: "no model is configured (TOOLCHAIN_PLANNER_MODEL)" };
    } else {
      const coordinates = await this.coordinates(input, usable);
      const messages = buildPrompt({ request: input.request, context: input.context, coordinates, manifest: registry.manifest(usable) });
      try {
        const first = await this.llm.propose(messages, input.signal);
        usage = addUsage(usage, first.usage);
        let clamped = clampPlan(first.plan, (n) => registry.get(n), this.config);
        const warnings: PlanWarning[] = [];
        let plan: ToolChainPlan | undefined;
        try {
          plan = validate(clamped.plan);
        } catch (e) {
          const issues = issuesOf(e);
          repairRounds = 1;
          const second = await this.llm.propose([...messages, repairMessage(first.plan, issues)], input.signal);
          usage = addUsage(usage, second.usage);
          clamped = clampPlan(second.plan, (n) => registry.get(n), this.config);
          try {
            plan = validate(clamped.plan);
            warnings.push({ code: "repaired", message: `the model's first plan was refused (${issues.map((i) => `${i.code}: ${i.message}`).join("; ")}); its repaired plan passed` });
          } catch (e2) {
            const left = issuesOf(e2);
            fallback = { reason: "validation_failed", detail: `the model's plan still failed validation after a repair round: ${left.map((i) => `${i.code}: ${i.message}`).join("; ")}` };
          }
        }
        if (plan) {
          return { plan, planner: { kind: "llm", model: this.llm.model }, warnings: [...clamped.warnings, ...warnings], usage, repairRounds, durationMs: this.now() - started };
        }
      } catch (e) {
        if (!(e instanceof ModelCallError)) throw e;
        fallback = { reason: e.reason, detail: e.message };
      }
    }
    return this.fallback(input, usable, validate, fallback!, { usage, repairRounds, started });
  }

  private fallback(
    input: PlanningInput,
    usable: (name: string) => boolean,
    validate: (plan: unknown) => ToolChainPlan,
    why: { reason: FallbackReason; detail: string },
    so: { usage?: TokenUsage; repairRounds: number; started: number },
  ): PlanningOutcome {
    const planner: PlannerInfo = { kind: "fallback", ...(this.llm ? { model: this.llm.model } : {}), fallbackReason: why.reason, fallbackDetail: why.detail };
    let fb;
    try {
      fb = fallbackPlan({ request: input.request, context: input.context, available: usable, now: this.now() });
    } catch (e) {
      const err = e as ToolchainError;
      throw new ToolchainError(err.code ?? ErrorCode.PLANNING_FAILED, `${err.message} (fallback planner used because ${why.reason}: ${why.detail})`, {
        details: { ...(err.details as object), planner },
      });
    }
    let plan: ToolChainPlan;
    try {
      plan = validate(fb.plan);
    } catch (e) {
      throw new ToolchainError(ErrorCode.PLANNING_FAILED, `the fallback planner's plan does not validate here: ${(e as Error).message}`, {
        details: { understood: fb.understood, issues: issuesOf(e), planner },
      });
    }
    return { plan, planner, warnings: fb.warnings, usage: so.usage, repairRounds: so.repairRounds, durationMs: this.now() - so.started, understood: fb.understood };
  }

  /** The target table and, when the workspace can read it, its schema (read with the describe skill). */
  private async coordinates(input: PlanningInput, usable: (name: string) => boolean): Promise<BusinessCoordinates> {
    const coords = businessCoordinates(input.context);
    const table = coords.table;
    const describe = this.deps.registry.get(FALLBACK_SKILLS.schema);
    if (!table || table.schema !== undefined || !describe || !usable(describe.name)) return coords;
    const signal = AbortSignal.timeout(SCHEMA_READ_TIMEOUT_MS);
    const ctx = {
      runId: "planning",
      stepId: "planning",
      attempt: 1,
      idempotencyKey: "planning:schema",
      signal,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
      context: input.context ?? {},
      workspaceId: input.workspaceId ?? "default",
    } as SkillContext;
    try {
      const args = describe.input.parse({ tableId: table.id });
      return { table: { ...table, schema: await describe.execute(args, ctx) } };
    } catch {
      return coords; // the plan's own describe step will report a missing table
    }
  }
}
