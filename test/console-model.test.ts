/** The console's pure logic: timeline from events, record tables, argument validation, the committed bundle. */
import { describe, expect, it } from "vitest";
import { fc, test as prop } from "@fast-check/vitest";
import { z } from "zod";
import { buildTimeline, ticks } from "../console/src/model/timeline.js";
import { recordTables, columnsOf, cellText } from "../console/src/model/records.js";
import { validateJson } from "../console/src/model/validate.js";
import { actionsFor, collectPending } from "../console/src/model/decisions.js";
import { staleConsoleFiles } from "../scripts/build-console.js";

type Ev = { seq: number; type: string; stepId?: string; at: string; data: Record<string, unknown> };
const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms).toISOString();

describe("timeline", () => {
  it("draws attempts, the back-off before a retry, a confirmation wait and compensations", () => {
    let seq = 0;
    const e = (ms: number, type: string, stepId?: string, data: Record<string, unknown> = {}): Ev => ({
      seq: ++seq,
      type,
      stepId,
      at: at(ms),
      data,
    });
    const t = buildTimeline(["a", "b"], [
      e(0, "planning_started"),
      e(10, "step_started", "a", { attempt: 1 }),
      e(50, "step_retrying", "a", { attempt: 1, delayMs: 20 }),
      e(70, "step_started", "a", { attempt: 2 }),
      e(100, "step_completed", "a"),
      e(100, "step_waiting_confirmation", "b"),
      e(300, "step_confirmed", "b", { decision: "reject" }),
      e(300, "step_failed", "b"),
      e(310, "rollback_started"),
      e(330, "step_rolled_back", "a"),
      e(340, "run_failed"),
    ] as never);
    const a = t.lanes.find((l) => l.stepId === "a")!.segments;
    expect(a.map((s) => [s.kind, s.start - t.start!, s.end! - t.start!, s.outcome])).toEqual([
      ["attempt", 10, 50, "retried"],
      ["backoff", 50, 70, "retried"],
      ["attempt", 70, 100, "completed"],
      ["compensation", 310, 330, "rolled_back"],
    ]);
    const b = t.lanes.find((l) => l.stepId === "b")!.segments;
    expect(b.map((s) => [s.kind, s.start - t.start!, s.end! - t.start!, s.outcome])).toEqual([
      ["waiting", 100, 300, "rejected"],
    ]);
    expect(t.open).toBe(false);
    expect(t.end! - t.start!).toBe(340);
  });

  it("keeps a wait open until its decision, and a failed strict compensation until the operator answers", () => {
    const t = buildTimeline(["a"], [
      { seq: 1, type: "step_started", stepId: "a", at: at(0), data: { attempt: 1 } },
      { seq: 2, type: "step_completed", stepId: "a", at: at(5), data: {} },
      { seq: 3, type: "rollback_started", at: at(10), data: {} },
      { seq: 4, type: "step_rollback_failed", stepId: "a", at: at(20), data: {} },
      { seq: 5, type: "rollback_waiting_decision", stepId: "a", at: at(20), data: {} },
    ] as never);
    expect(t.open).toBe(true);
    expect(t.lanes[0]!.segments.at(-1)).toMatchObject({ kind: "decision", end: null });
  });

  // any interleaving of well-formed step lifecycles: bars never run backwards, one bar per attempt
  const lifecycle = fc.record({
    attempts: fc.integer({ min: 1, max: 4 }),
    waits: fc.boolean(),
    gap: fc.integer({ min: 0, max: 50 }),
  });
  prop.prop([fc.array(lifecycle, { minLength: 1, maxLength: 6 }), fc.integer({ min: 0, max: 1000 })])(
    "segments are well formed for any interleaving",
    (steps, seed) => {
      const streams = steps.map((s, i) => {
        const id = `s${i}`;
        const out: Omit<Ev, "seq" | "at">[] = [];
        if (s.waits)
          out.push(
            { type: "step_waiting_confirmation", stepId: id, data: {} },
            { type: "step_confirmed", stepId: id, data: { decision: "approve" } },
          );
        for (let k = 1; k <= s.attempts; k++) {
          out.push({ type: "step_started", stepId: id, data: { attempt: k } });
          out.push(
            k < s.attempts
              ? { type: "step_retrying", stepId: id, data: { attempt: k } }
              : { type: "step_completed", stepId: id, data: {} },
          );
        }
        return out;
      });
      // merge the streams in a seeded order, time increasing with seq
      let r = seed;
      const events: Ev[] = [];
      const cursors = streams.map(() => 0);
      while (cursors.some((c, i) => c < streams[i]!.length)) {
        const live = cursors.flatMap((c, i) => (c < streams[i]!.length ? [i] : []));
        r = (r * 1103515245 + 12345) % 2147483648;
        const i = live[r % live.length]!;
        events.push({ ...streams[i]![cursors[i]!++]!, seq: events.length + 1, at: at(events.length * 7) });
      }
      const t = buildTimeline(
        steps.map((_, i) => `s${i}`),
        events as never,
      );
      expect(t.open).toBe(false);
      for (const [i, l] of t.lanes.entries()) {
        for (const s of l.segments) expect(s.end!).toBeGreaterThanOrEqual(s.start);
        expect(l.segments.filter((s) => s.kind === "attempt")).toHaveLength(steps[i]!.attempts);
        expect(l.segments.filter((s) => s.kind === "backoff")).toHaveLength(steps[i]!.attempts - 1);
        expect(l.segments.filter((s) => s.kind === "waiting")).toHaveLength(steps[i]!.waits ? 1 : 0);
        expect(l.segments.filter((s) => s.kind === "attempt").at(-1)!.outcome).toBe("completed");
      }
    },
  );

  it("ticks cover the span in 1/2/5 steps", () => {
    expect(ticks(1000)).toEqual([0, 200, 400, 600, 800, 1000]);
    expect(ticks(0)).toEqual([0]);
  });
});

describe("record tables", () => {
  it("finds lists of records at the top and nested, like a QTable preview { records: [...] }", () => {
    expect(recordTables([{ a: 1 }, { b: 2 }])).toEqual([{ path: "", columns: ["a", "b"], rows: [{ a: 1 }, { b: 2 }] }]);
    const t = recordTables({
      tableId: "t",
      records: [{ title: "x", n: 1 }],
      deep: { more: [{ k: true }] },
      scalars: [1, 2],
    });
    expect(t.map((x) => [x.path, x.columns])).toEqual([
      ["records", ["title", "n"]],
      ["deep.more", ["k"]],
    ]);
    expect(recordTables([])).toEqual([]);
    expect(recordTables([{ a: 1 }, 2])).toEqual([]);
    expect(recordTables("<script>")).toEqual([]);
  });

  prop.prop([
    fc.array(fc.dictionary(fc.string({ minLength: 1, maxLength: 5 }), fc.jsonValue(), { maxKeys: 4 }), {
      minLength: 1,
      maxLength: 8,
    }),
  ])("any array of plain objects is one table with every key as a column", (rows) => {
    const [t] = recordTables(rows);
    expect(t!.rows).toBe(rows);
    expect(new Set(t!.columns)).toEqual(new Set(rows.flatMap((r) => Object.keys(r))));
    expect(columnsOf(rows)).toEqual(t!.columns);
    for (const r of rows) for (const c of t!.columns) expect(typeof cellText(r[c])).toBe("string");
  });
});

describe("argument validation against the skill's JSON Schema", () => {
  const schema = z.toJSONSchema(
    z
      .object({
        tableId: z.string().min(1),
        records: z.array(z.object({ title: z.string(), estimateDays: z.number().int() }).strict()),
      })
      .strict(),
  );

  it("accepts valid arguments and names the field of invalid ones", () => {
    expect(
      validateJson(JSON.stringify({ tableId: "t", records: [{ title: "a", estimateDays: 1 }] }), schema, {
        object: true,
      }),
    ).toMatchObject({ ok: true });
    const bad = validateJson(JSON.stringify({ tableId: "", records: [{ title: "a", estimateDays: "x" }] }), schema, {
      object: true,
    });
    expect(bad.ok).toBe(false);
    expect(bad.problems.join("\n")).toMatch(/\/tableId/);
    expect(bad.problems.join("\n")).toMatch(/\/records\/0\/estimateDays/);
    const extra = validateJson(JSON.stringify({ tableId: "t", records: [], sneaky: 1 }), schema, { object: true });
    expect(extra.ok).toBe(false);
    expect(extra.problems.join("\n")).toMatch(/sneaky/);
    expect(validateJson("{ nope", schema).problems[0]).toMatch(/^not valid JSON/);
    expect(validateJson("[1]", schema, { object: true }).problems).toEqual(["must be a JSON object"]);
    expect(validateJson("", undefined, { optional: true })).toEqual({ ok: true, value: undefined, problems: [] });
  });
});

describe("decisions", () => {
  it("offers the actions each kind of decision accepts", () => {
    expect(actionsFor("confirmation").map((a) => a.decision)).toEqual(["approve", "reject"]);
    expect(actionsFor("in_doubt").map((a) => a.decision)).toEqual(["approve", "mark_done", "reject"]);
    expect(actionsFor("compensation").map((a) => a.decision)).toEqual(["approve", "skip", "reject"]);
  });
  it("lists the longest waiting first", () => {
    const v = (runId: string, updatedAt: string, steps: string[]) => ({
      runId,
      status: "waiting_confirmation",
      updatedAt,
      plan: { steps: [] },
      pendingConfirmations: steps.map((stepId) => ({ stepId, skillName: "s", arguments: {}, preview: null })),
    });
    const items = collectPending([v("r2", at(20), ["b", "a"]), v("r1", at(10), ["z"]), v("r3", at(5), [])] as never);
    expect(items.map((i) => `${i.runId}/${i.pending.stepId}`)).toEqual(["r1/z", "r2/a", "r2/b"]);
  });
});

describe("the committed console bundle", () => {
  it("is what npm run build:console produces from console/src (run it and commit console/dist)", async () => {
    expect(await staleConsoleFiles()).toEqual([]);
  });
});
