/**
 * One model question for a QTable seam (split, estimate), on the planner's model configuration
 * (there is one): the planner's call path (retries inside the deadline, strict schema for
 * `jsonSchema`, answers read from prose or fences), a second call carrying the previous answer's
 * problems, the raw answer returned for the skill to check. An answer that is not JSON of the
 * shape throws `UnreadableAnswer` (the skill repairs it); a model known to be stalling (the
 * planner just timed out on it: the stall breaker) is not asked: it throws at once.
 */
import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import { z } from "zod";
import { UnreadableAnswer } from "../../skills/qtable/model-answer.js";
import { resolvePlannerConfig, type PlannerOptions } from "./config.js";
import { callStructured, chatModel, type StructuredSpec } from "./model-call.js";
import { dropNullProperties, toStrictSchema, type JsonSchema } from "./model-schema.js";
import { endpointKey, stallBreaker } from "./stall-breaker.js";

/** The structured-output spec of a zod object schema (its JSON Schema, and the strict form). */
export function specOf(
  name: string,
  description: string,
  schema: z.ZodType,
  prefer: StructuredSpec["prefer"],
): StructuredSpec {
  const { $schema: _ignored, ...json } = z.toJSONSchema(schema, { io: "input" }) as JsonSchema;
  return { name, description, schema: json, strictSchema: toStrictSchema(json), prefer };
}

export type Ask = (user: string, signal: AbortSignal, repair?: { problems: string; what: string }) => Promise<unknown>;

/** An asker on the configured model, or undefined when no model is configured. */
export function structuredAsker(opts: PlannerOptions, spec: StructuredSpec, system: string): Ask | undefined {
  const config = resolvePlannerConfig(opts);
  if (!config.model) return undefined;
  const model = { ...config, model: config.model };
  const chat = chatModel(model);
  const key = endpointKey(model);
  const sys = config.method === "jsonMode" ? `${system}\nJSON Schema: ${JSON.stringify(spec.schema)}` : system;
  return async (user, signal, repair) => {
    if (stallBreaker.isOpen(key)) throw new Error("the model is stalling (it just timed out on the planner)");
    const messages = [
      new SystemMessage(sys),
      new HumanMessage(user),
      ...(repair
        ? [
            new HumanMessage(
              `Your previous ${repair.what} was rejected: ${repair.problems.slice(0, 2_000)}\nAnswer the corrected ${repair.what}.`,
            ),
          ]
        : []),
    ];
    const out = await callStructured(chat, model, spec, messages, { signal });
    if (out.kind !== "value") throw new UnreadableAnswer(`the answer is not JSON of the asked shape (${out.error})`);
    return dropNullProperties(out.value);
  };
}
