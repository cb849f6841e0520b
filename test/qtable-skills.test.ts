/**
 * Each QTable skill on its own, through the kernel's executeAttempt (input schema, context,
 * output schema): behaviour, errors, the model seams, repeated execution with one idempotency key.
 */
import { describe, expect, test } from "vitest";
import { executeAttempt } from "../src/kernel/execute-attempt.js";
import { silentLogger } from "../graphs/env.js";
import type { Skill } from "../src/skills/contract.js";
import { MemoryTableStore, qtableSkills, type SplitWith } from "../skills/qtable/index.js";

const store = new MemoryTableStore();
const byName = (skills: Skill[]) => new Map(skills.map((s) => [s.name, s]));
const pack = byName(qtableSkills({ store }));
const exec = (skill: Skill, args: unknown, o: { workspaceId?: string; key?: string } = {}) =>
  executeAttempt({
    skill,
    args,
    runId: "r",
    stepId: "s",
    attempt: 1,
    idempotencyKey: o.key ?? "r:s",
    context: {},
    workspaceId: o.workspaceId ?? "w1",
    logger: silentLogger,
    signal: new AbortController().signal,
  });

describe("QTable skills", () => {
  test("split: deterministic without a model; the model seam gets the goal, context and signal, and its tasks are checked", async () => {
    const r = await exec(pack.get("qtable.task.split")!, { goal: "Build a vendor portal with invoicing" });
    expect(r).toMatchObject({ ok: true });
    expect((r as { output: { tasks: { title: string }[] } }).output.tasks.map((t) => t.title)).toContain(
      "Build invoicing for the vendor portal",
    );
    expect(await exec(pack.get("qtable.task.split")!, { goal: "" })).toMatchObject({
      ok: false,
      error: { code: "INVALID_INPUT" },
    });

    const seen: unknown[] = [];
    const model: SplitWith = async (goal, context, signal) => {
      seen.push(goal, context, signal instanceof AbortSignal);
      return [
        { key: "a", title: "A", description: "", dependsOn: [] },
        { key: "b", title: "B", description: "", dependsOn: ["a"] },
      ];
    };
    const withModel = byName(qtableSkills({ store, splitWith: model }));
    expect(await exec(withModel.get("qtable.task.split")!, { goal: "g", context: { team: 3 } })).toMatchObject({
      ok: true,
      output: { tasks: [{ key: "a" }, { key: "b", dependsOn: ["a"] }] },
    });
    expect(seen).toEqual(["g", { team: 3 }, true]);
    // a cyclic answer, then garbage: the template answers, labelled, after one repair round
    const answers: unknown[] = [[{ key: "a", title: "A", description: "", dependsOn: ["a"] }], [{ nope: true }]];
    const repairs: unknown[] = [];
    const bad = byName(
      qtableSkills({ store, splitWith: async (_g, _c, _s, repair) => (repairs.push(repair), answers.shift()) }),
    );
    const r2 = await exec(bad.get("qtable.task.split")!, { goal: "Plan the team offsite" });
    expect(r2).toMatchObject({
      ok: true,
      output: {
        source: "template",
        kind: "event",
        repairRounds: 1,
        warnings: [expect.stringContaining("the model's tasks were invalid twice")],
      },
    });
    expect(repairs).toEqual([undefined, { problems: "task dependencies have a cycle: a -> a" }]);
  });

  test("estimate: three points and days > 0 for every task; a model answer missing a task falls back, with a warning", async () => {
    const tasks = [
      { key: "a", title: "Design it" },
      { key: "b", title: "Build it", dependsOn: ["a"] },
    ];
    const r = await exec(pack.get("qtable.task.estimate")!, { tasks });
    expect(r).toMatchObject({ ok: true, output: { estimates: [{ key: "a" }, { key: "b" }] } });
    for (const e of (r as { output: { estimates: { days: number; confidence: number }[] } }).output.estimates) {
      expect(e.days).toBeGreaterThan(0);
      expect(e.confidence).toBeGreaterThan(0);
    }
    expect(await exec(pack.get("qtable.task.estimate")!, { tasks: [...tasks, tasks[0]] })).toMatchObject({
      ok: false,
      error: { code: "INVALID_INPUT", message: "duplicate task keys: a" },
    });
    const partial = byName(qtableSkills({ store, estimateWith: async () => [{ key: "a", days: 1, confidence: 0.9 }] }));
    expect(await exec(partial.get("qtable.task.estimate")!, { tasks })).toMatchObject({
      ok: true,
      output: {
        estimates: [
          { key: "a", source: "heuristic" },
          { key: "b", source: "heuristic" },
        ],
        warnings: [expect.stringContaining("missing: b")],
      },
    });
  });

  test("gantt: errors name the cycle; bad dates fail the input schema", async () => {
    const g = pack.get("qtable.gantt.generate")!;
    expect(
      await exec(g, {
        tasks: [
          { key: "a", title: "A", dependsOn: ["b"] },
          { key: "b", title: "B", dependsOn: ["a"] },
        ],
        estimates: [
          { key: "a", days: 1 },
          { key: "b", days: 1 },
        ],
        startDate: "2026-12-21",
      }),
    ).toMatchObject({
      ok: false,
      error: { code: "INVALID_INPUT", message: "task dependencies have a cycle: a -> b -> a" },
    });
    expect(
      await exec(g, { tasks: [{ key: "a", title: "A" }], estimates: [{ key: "a", days: 1 }], startDate: "21.12.2026" }),
    ).toMatchObject({ ok: false, error: { code: "INVALID_INPUT", message: expect.stringContaining("startDate") } });
  });

  test("describe: the workspace's table by id or name; another workspace's is not found", async () => {
    const t = await store.ensureWorkspace("w1");
    const d = pack.get("qtable.table.schema.describe")!;
    expect(await exec(d, { tableId: t.id })).toMatchObject({ ok: true, output: { id: t.id, name: "Tasks" } });
    expect(await exec(d, { tableId: "Tasks" })).toMatchObject({ ok: true, output: { id: t.id } });
    expect(await exec(d, { tableId: t.id }, { workspaceId: "w2" })).toMatchObject({
      ok: false,
      error: { code: "TABLE_NOT_FOUND" },
    });
  });

  test("records.create: the preview lists the records; executed twice with one idempotency key it writes once", async () => {
    const t = await store.ensureWorkspace("w3");
    const c = pack.get("qtable.task.records.create")!;
    const args = {
      tableId: t.id,
      tasks: [
        { key: "a", title: "A" },
        { key: "b", title: "B", dependsOn: ["a"] },
      ],
      estimates: [
        { key: "a", days: 1 },
        { key: "b", days: 2 },
      ],
    };
    const preview = await c.preview!(c.input.parse(args), {
      runId: "r",
      stepId: "s",
      idempotencyKey: "k",
      signal: new AbortController().signal,
      logger: silentLogger,
      context: {},
      workspaceId: "w3",
    });
    expect(preview).toEqual({
      action: "write_records",
      table: { id: t.id, name: "Tasks" },
      keyField: "key",
      count: 2,
      records: [
        { title: "A", key: "a", estimateDays: 1, status: "todo" },
        { title: "B", key: "b", estimateDays: 2, status: "todo", dependsOn: ["new:a"] },
      ],
      diff: {
        created: [
          { key: "a", values: { title: "A", key: "a", estimateDays: 1, status: "todo" } },
          { key: "b", values: { title: "B", key: "b", estimateDays: 2, status: "todo", dependsOn: ["new:a"] } },
        ],
        updated: [],
        unchanged: [],
        removed: [],
      },
    });
    const first = await exec(c, args, { workspaceId: "w3", key: "run-1:create" });
    const second = await exec(c, args, { workspaceId: "w3", key: "run-1:create" });
    expect(first).toMatchObject({ ok: true, output: { created: true } });
    expect(second).toMatchObject({ ok: true, output: { created: false } });
    const ids = (first as { output: { recordIds: string[] } }).output.recordIds;
    expect((second as { output: { recordIds: string[] } }).output.recordIds).toEqual(ids);
    expect((await store.listRecords("w3", t.id))!.records.map((r) => r.id)).toEqual(ids);
    // reconcile finds the write by key; createdRecords names exactly those records
    expect(
      await c.reconcile!({
        runId: "run-1",
        stepId: "create",
        idempotencyKey: "run-1:create",
        workspaceId: "w3",
        input: args,
        signal: new AbortController().signal,
        logger: silentLogger,
      }),
    ).toMatchObject({ applied: true, output: { recordIds: ids } });
    expect(
      await c.reconcile!({
        runId: "run-2",
        stepId: "create",
        idempotencyKey: "run-2:create",
        workspaceId: "w3",
        input: args,
        signal: new AbortController().signal,
        logger: silentLogger,
      }),
    ).toEqual({ applied: false });
    expect(c.createdRecords!.list((first as unknown as { output: never }).output, args)).toEqual(
      ids.map((id) => ({ resource: t.id, id })),
    );
    expect(c.serialKey!(args)).toBe(`qtable:${t.id}`);
    // both forms at once, or neither, fail the input schema
    expect(await exec(c, { tableId: t.id }, { workspaceId: "w3", key: "x" })).toMatchObject({
      ok: false,
      error: { code: "INVALID_INPUT" },
    });
    expect(
      await exec(c, { tableId: t.id, records: [{ title: "x" }], tasks: args.tasks }, { workspaceId: "w3", key: "y" }),
    ).toMatchObject({ ok: false, error: { code: "INVALID_INPUT" } });
  });

  test("metadata is honest", () => {
    const meta = (n: string) => {
      const s = pack.get(n)!;
      return {
        sideEffects: s.sideEffects,
        idempotent: s.idempotent,
        confirm: s.requiresConfirmation ?? false,
        compensable: Boolean(s.compensate || s.createdRecords),
        reconcile: Boolean(s.reconcile),
      };
    };
    expect(meta("qtable.task.split")).toEqual({
      sideEffects: "none",
      idempotent: true,
      confirm: false,
      compensable: false,
      reconcile: false,
    });
    expect(meta("qtable.task.estimate")).toEqual({
      sideEffects: "read",
      idempotent: true,
      confirm: false,
      compensable: false,
      reconcile: false,
    });
    expect(meta("qtable.gantt.generate")).toEqual({
      sideEffects: "none",
      idempotent: true,
      confirm: false,
      compensable: false,
      reconcile: false,
    });
    expect(meta("qtable.table.schema.describe")).toEqual({
      sideEffects: "read",
      idempotent: true,
      confirm: false,
      compensable: false,
      reconcile: false,
    });
    expect(meta("qtable.task.records.create")).toEqual({
      sideEffects: "write",
      idempotent: true,
      confirm: true,
      compensable: true,
      reconcile: true,
    });
    expect(meta("qtable.notify.send")).toEqual({
      sideEffects: "external",
      idempotent: false,
      confirm: true,
      compensable: false,
      reconcile: true,
    });
  });
});
