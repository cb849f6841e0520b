/** A wait skill that records when its body starts and ends (for the latency diagnostics). */
import { z } from "zod";
import { defineSkill } from "../src/index.js";
import { now, sleep } from "./timing.js";

export const marks: { start: number; end: number }[] = [];

export const probeSkill = defineSkill({
  name: "bench.probe",
  description: "waits ms and records its start and end",
  input: z.object({ ms: z.number().int().min(0), i: z.number().int() }).strict(),
  sideEffects: "none",
  idempotent: true,
  estimateDurationMs: (a) => a.ms,
  async execute(args) {
    const start = now();
    await sleep(args.ms);
    marks[args.i] = { start, end: now() };
    return null;
  },
});
