/**
 * The planner: a request (+ context) → a validated ToolChainPlan. The model (when configured)
 * writes a plan in the model-facing schema; the runtime reads it (prose, fences, strict mode's
 * encodings), refuses values the run history cannot store, clamps its execution semantics to the
 * skills' metadata and validates it (reference paths against the skills' output schemas
 * included); a refused or unreadable answer goes back to the model once with the exact issues; if
 * the model is not configured, fails, refuses, is cut off, times out or stays wrong, the
 * deterministic fallback planner writes the plan, with a stable reason. Every surface plans through this (the graph's planner node, the
 * API's /plan, the CLI's `plan`).
 */
import { recordUsage, traced } from "../telemetry/tool-spans.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { ToolChainPlan } from "../plan/schema.js";
import { compilePlan, PlanValidationError, type PlanIssue } from "../plan/validate.js";
import type { SkillContext } from "../skills/contract.js";
import type { SkillRegistry } from "../skills/registry.js";
import { findUnstorable, storableText } from "../kernel/json-safety.js";
import { budgetIssues, planBudgetFromEnv, type PlanBudget } from "../plan/admission.js";
import { clampPlan } from "./clamp.js";
import { resolvePlannerConfig, type FallbackReason, type PlannerConfig, type PlannerOptions } from "./config.js";
import { businessCoordinates } from "./coordinates.js";
import { FALLBACK_SKILLS, fallbackPlan, type Understanding } from "./fallback-planner.js";
import { ModelCallError, OpenAiPlanModel, type ModelAnswer, type PlanModel, type TokenUsage } from "./llm-planner.js";
import { fromModelPlan, modelPlanSchema } from "./model-schema.js";
import { buildPrompt, repairMessage, type BusinessCoordinates } from "./prompt.js";
import type { PlanWarning } from "./warnings.js";
import { DEFAULT_WORKSPACE } from "../kernel/workspace.js";

export type { PlanWarning, PlanWarningCode } from "./warnings.js";
export type { FallbackReason, PlannerConfig, PlannerOptions, StructuredMethod } from "./config.js";
export { FALLBACK_REASONS, plannerConfigFromEnv, resolvePlannerConfig } from "./config.js";
export type { PlanModel, TokenUsage, ModelAnswer } from "./llm-planner.js";
export { OpenAiPlanModel, ModelCallError } from "./llm-planner.js";
export type { Understanding } from "./fallback-planner.js";

export type { PlannerInfo, PlannerKind } from "./info.js";
import type { PlannerInfo } from "./info.js";

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
  /** Steps that will or may ask a person before their effect (set by the runtime: src/plan/admission.ts `stepAsks`). */
  asks?: string[];
}

export interface PlannerDeps {
  registry: SkillRegistry;
  config?: PlannerOptions;
  /** A model other than ChatOpenAI (tests, other providers). Default: ChatOpenAI when `config.model` is set. */
  model?: PlanModel;
  now?: () => number;
  /** The server log (the provider's error text goes here, never to tenants). @default console.warn */
  log?: (line: string) => void;
  /** What a model-written plan may ask for. @default planBudgetFromEnv() */
  budget?: PlanBudget;
}

const SCHEMA_READ_TIMEOUT_MS = 5_000;

const addUsage = (a: TokenUsage | undefined, b: TokenUsage | undefined): TokenUsage | undefined =>
  !a
    ? b
    : !b
      ? a
      : {
          inputTokens: a.inputTokens + b.inputTokens,
          outputTokens: a.outputTokens + b.outputTokens,
          totalTokens: a.totalTokens + b.totalTokens,
        };

const describe = (issues: readonly PlanIssue[]) => issues.map((i) => `${i.code}: ${i.message}`).join("; ");

type Checked =
  { ok: true; plan: ToolChainPlan; warnings: PlanWarning[] } | { ok: false; issues: PlanIssue[]; previous: unknown };

const issuesOf = (e: unknown): PlanIssue[] => {
  if (e instanceof PlanValidationError) return e.issues;
  const err = e as ToolchainError;
  return [{ code: err?.code ?? ErrorCode.PLAN_INVALID, message: String(err?.message ?? e) }];
};

export class Planner {
  readonly config: PlannerConfig;
  private readonly llm?: PlanModel;
  private readonly now: () => number;
  private readonly log: (line: string) => void;

  /** The budget model plans are held to (src/plan/admission.ts); the runtime sets its own. */
  budget: PlanBudget;

  constructor(private readonly deps: PlannerDeps) {
    this.config = resolvePlannerConfig(deps.config);
    this.budget = deps.budget ?? planBudgetFromEnv();
    this.now = deps.now ?? Date.now;
    this.log = deps.log ?? ((line) => console.warn(line));
    this.llm =
      deps.model ?? (this.config.model ? new OpenAiPlanModel({ ...this.config, model: this.config.model }) : undefined);
  }

  /** The model that writes plans, if one is configured. */
  get model(): string | undefined {
    return this.llm?.model;
  }

  /**
   * Plan a request. Throws PLANNING_FAILED when no planner can write a valid plan for it. Traced
   * as one `plan` span (each model call a `chat <model>` child: model-call.ts).
   */
  plan(input: PlanningInput): Promise<PlanningOutcome> {
    return traced(
      () => ({
        name: "plan",
        attributes: {
          ...(this.llm?.model ? { "gen_ai.request.model": this.llm.model } : {}),
          "toolchain.workspace.id": input.workspaceId ?? DEFAULT_WORKSPACE,
        },
      }),
      () => this.planOnce(input),
      (out, span) => {
        span.setAttribute("toolchain.planner.kind", out.planner.kind);
        span.setAttribute("toolchain.plan.steps", out.plan.steps.length);
        span.setAttribute("toolchain.planner.repair_rounds", out.repairRounds);
        recordUsage(span, out.usage);
      },
    );
  }

  private async planOnce(input: PlanningInput): Promise<PlanningOutcome> {
    const started = this.now();
    const registry = this.deps.registry;
    const usable = (name: string) => registry.has(name) && (!input.allowSkill || input.allowSkill(name));
    const validate = (plan: unknown) =>
      compilePlan(plan, {
        registry,
        allowSkill: input.allowSkill,
        context: input.context ?? {},
        memory: input.memory ?? {},
      }).plan;

    let usage: TokenUsage | undefined;
    let repairRounds = 0;
    let fallback: { reason: FallbackReason; detail: string };
    if (!this.llm) {
      fallback = { reason: "not_configured", detail: "no model is configured (TOOLCHAIN_PLANNER_MODEL)" };
    } else {
      const coordinates = await this.coordinates(input, usable);
      const skills = registry.list().filter((s) => usable(s.name));
      const names = skills.map((s) => s.name);
      const planSchema = this.config.method === "jsonMode" ? modelPlanSchema(names, false) : undefined;
      const messages = buildPrompt({
        request: input.request,
        context: input.context,
        coordinates,
        skills,
        now: this.now(),
        planSchema,
      });
      try {
        const first = await this.llm.propose(messages, input.signal, names);
        usage = addUsage(usage, first.usage);
        let checked = this.check(first, validate);
        const warnings: PlanWarning[] = [];
        if (!checked.ok) {
          const issues = checked.issues;
          repairRounds = 1;
          const second = await this.llm.propose(
            [...messages, repairMessage(checked.previous, issues)],
            input.signal,
            names,
          );
          usage = addUsage(usage, second.usage);
          const again = this.check(second, validate);
          if (again.ok) {
            warnings.push({
              code: "repaired",
              message: storableText(
                `the model's first plan was refused (${describe(issues)}); its repaired plan passed`,
              ),
            });
          } else {
            const unreadable = "unreadable" in second;
            fallback = {
              reason: unreadable ? "invalid_output" : "validation_failed",
              detail: storableText(
                `the model's ${unreadable ? "answer could still not be read as a plan" : "plan still failed validation"} after a repair round: ${describe(again.issues)}`,
              ),
            };
          }
          checked = again;
        }
        if (checked.ok) {
          return {
            plan: checked.plan,
            planner: { kind: "llm", model: this.llm.model },
            warnings: [...checked.warnings, ...warnings],
            usage,
            repairRounds,
            durationMs: this.now() - started,
          };
        }
      } catch (e) {
        if (!(e instanceof ModelCallError)) throw e;
        // the provider's own words (which can quote the operator's masked key) stay in the server log
        if (e.providerMessage)
          this.log(
            `planner: model ${this.llm.model} ${e.reason}: ${e.message}; the provider said: ${e.providerMessage}`,
          );
        fallback = { reason: e.reason, detail: e.message };
      }
    }
    return this.fallback(input, usable, validate, fallback!, { usage, repairRounds, started });
  }

  /**
   * A model answer as a runnable plan, or the issues for the repair round: unreadable text, strict
   * mode's encodings, values the run history cannot store (NUL, lone surrogates), then the clamp
   * and validation (reference paths included) exactly as for any plan.
   */
  private check(answer: ModelAnswer, validate: (plan: unknown) => ToolChainPlan): Checked {
    if ("unreadable" in answer) {
      return {
        ok: false,
        previous: answer.text,
        issues: [
          {
            code: ErrorCode.PLAN_INVALID,
            message: `the answer could not be read as a JSON plan: ${answer.unreadable}`,
          },
        ],
      };
    }
    const { plan: raw, issues } = fromModelPlan(answer.plan);
    if (issues.length)
      return {
        ok: false,
        previous: answer.plan,
        issues: issues.map((i) => ({
          code: ErrorCode.PLAN_INVALID,
          message: `plan.${i.path}: ${i.message}`,
          path: i.path,
        })),
      };
    const bad = findUnstorable(raw, "plan");
    if (bad)
      return {
        ok: false,
        previous: answer.plan,
        issues: [
          {
            code: ErrorCode.UNSUPPORTED_VALUE,
            message: `${bad.message}: write it without that character`,
            path: bad.path,
          },
        ],
      };
    // the model's plan is admitted like any model-written plan: clamped, then held to the budget
    // (an over-budget plan gets the repair round naming the budget, like any other issue)
    const clamped = clampPlan(raw, (n) => this.deps.registry.get(n), this.config);
    const over = budgetIssues(clamped.plan, (n) => this.deps.registry.get(n), this.budget);
    if (over.length) return { ok: false, previous: answer.plan, issues: over };
    try {
      return { ok: true, plan: validate(clamped.plan), warnings: clamped.warnings };
    } catch (e) {
      return { ok: false, previous: answer.plan, issues: issuesOf(e) };
    }
  }

  private fallback(
    input: PlanningInput,
    usable: (name: string) => boolean,
    validate: (plan: unknown) => ToolChainPlan,
    why: { reason: FallbackReason; detail: string },
    so: { usage?: TokenUsage; repairRounds: number; started: number },
  ): PlanningOutcome {
    const planner: PlannerInfo = {
      kind: "fallback",
      ...(this.llm ? { model: this.llm.model } : {}),
      fallbackReason: why.reason,
      fallbackDetail: why.detail,
    };
    let fb;
    try {
      fb = fallbackPlan({ request: input.request, context: input.context, available: usable, now: this.now() });
    } catch (e) {
      const err = e as ToolchainError;
      throw new ToolchainError(
        err.code ?? ErrorCode.PLANNING_FAILED,
        `${err.message} (fallback planner used because ${why.reason}: ${why.detail})`,
        {
          details: { ...(err.details as object), planner },
        },
      );
    }
    let plan: ToolChainPlan;
    try {
      plan = validate(fb.plan);
    } catch (e) {
      throw new ToolchainError(
        ErrorCode.PLANNING_FAILED,
        `the fallback planner's plan does not validate here: ${(e as Error).message}`,
        {
          details: { understood: fb.understood, issues: issuesOf(e), planner },
        },
      );
    }
    return {
      plan,
      planner,
      warnings: fb.warnings,
      usage: so.usage,
      repairRounds: so.repairRounds,
      durationMs: this.now() - so.started,
      understood: fb.understood,
    };
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
      workspaceId: input.workspaceId ?? DEFAULT_WORKSPACE,
      traceHeaders: () => ({}),
    } as SkillContext;
    try {
      const args = describe.input.parse({ tableId: table.id });
      return { table: { ...table, schema: await describe.execute(args, ctx) } };
    } catch {
      return coords; // the plan's own describe step will report a missing table
    }
  }
}
