import { z } from "zod";
import type { Skill } from "./contract.js";

export interface SkillManifestEntry {
  name: string;
  description: string;
  inputSchema: unknown;
  outputSchema?: unknown;
  sideEffects: Skill["sideEffects"];
  idempotent: boolean;
  parallelSafe: boolean;
  resource?: { name: string; limit: number; perSecond?: number };
  requiresConfirmation: boolean | "conditional";
  compensable: boolean;
  previewable: boolean;
}

const SKILL_NAME = /^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)+$/i;

export class SkillRegistry {
  private readonly skills = new Map<string, Skill>();
  /** Observed mean duration per skill (exponentially weighted), for critical-path priorities. */
  private readonly observed = new Map<string, number>();

  constructor(skills: Iterable<Skill> = []) {
    for (const s of skills) this.register(s);
  }

  register(skill: Skill): this {
    if (!SKILL_NAME.test(skill.name)) {
      throw new TypeError(`Expected skill name like "pack.name", got "${skill.name}"`);
    }
    if (this.skills.has(skill.name)) throw new TypeError(`Skill "${skill.name}" is already registered`);
    if (skill.resource && !(Number.isInteger(skill.resource.limit) && skill.resource.limit > 0)) {
      throw new TypeError(
        `Expected resource.limit of skill "${skill.name}" to be a positive integer, got ${skill.resource.limit}`,
      );
    }
    if (
      skill.resource?.perSecond !== undefined &&
      !(Number.isInteger(skill.resource.perSecond) && skill.resource.perSecond > 0)
    ) {
      throw new TypeError(
        `Expected resource.perSecond of skill "${skill.name}" to be a positive integer, got ${skill.resource.perSecond}`,
      );
    }
    this.skills.set(skill.name, skill);
    return this;
  }

  get(name: string): Skill | undefined {
    return this.skills.get(name);
  }
  has(name: string): boolean {
    return this.skills.has(name);
  }
  list(): Skill[] {
    return [...this.skills.values()];
  }

  observeDuration(name: string, ms: number): void {
    const prev = this.observed.get(name);
    this.observed.set(name, prev === undefined ? ms : prev * 0.8 + ms * 0.2);
  }

  /** Declared estimate for these arguments, else the observed mean, else undefined. */
  estimateMs(name: string, args: unknown): number | undefined {
    const s = this.skills.get(name);
    if (!s) return undefined;
    // undefined: the arguments are not known yet (a failed parse builds an error: not free)
    if (s.estimateDurationMs && args !== undefined) {
      const parsed = s.input.safeParse(args);
      if (parsed.success) {
        const v = s.estimateDurationMs(parsed.data);
        if (v !== undefined && Number.isFinite(v) && v >= 0) return v;
      }
    }
    return this.observed.get(name);
  }

  manifest(allow?: (name: string) => boolean): SkillManifestEntry[] {
    return this.list()
      .filter((s) => !allow || allow(s.name))
      .map((s) => {
        const e: SkillManifestEntry = {
          name: s.name,
          description: s.description,
          inputSchema: z.toJSONSchema(s.input, { unrepresentable: "any" }),
          sideEffects: s.sideEffects,
          idempotent: s.idempotent,
          parallelSafe: s.parallelSafe ?? true,
          requiresConfirmation:
            typeof s.requiresConfirmation === "function" ? "conditional" : Boolean(s.requiresConfirmation),
          compensable: typeof s.compensate === "function" || s.createdRecords !== undefined,
          previewable: typeof s.preview === "function",
        };
        if (s.output) e.outputSchema = z.toJSONSchema(s.output, { unrepresentable: "any" });
        if (s.resource) e.resource = { ...s.resource };
        return e;
      });
  }
}
