/**
 * The value a paused run is resumed with (LangGraph `Command({ resume })`): decisions for any
 * subset of the waiting steps, or a cancel. Every surface that resumes a run (the runtime, Studio,
 * the LangGraph server) is checked against this one schema.
 */
import { z } from "zod";
import { DecisionSchema } from "./decision.js";
import { ActorSchema, ViaSchema } from "./actor.js";

const DecisionsResumeSchema = z.object({ decisions: z.record(z.string(), DecisionSchema) }).strict();
const CancelResumeSchema = z
  .object({
    cancel: z.literal(true),
    reason: z.string().optional(),
    /** Who asked (the runtime passes the recorded cancel's principal). */
    by: ActorSchema.optional(),
    via: ViaSchema.optional(),
  })
  .strict();
export const ResumeSchema = z.union([DecisionsResumeSchema, CancelResumeSchema]);

/** The resume value parsed against the branch it claims to be, so an error names the field. */
export function parseResume(raw: unknown) {
  const claims = raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : undefined;
  if (claims && "decisions" in claims) return DecisionsResumeSchema.safeParse(raw);
  if (claims && "cancel" in claims) return CancelResumeSchema.safeParse(raw);
  return ResumeSchema.safeParse(raw);
}
export type ResumeValue = z.infer<typeof ResumeSchema>;
