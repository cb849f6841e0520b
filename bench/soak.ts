/**
 * Soak (`npm run bench -- soak [runs]`, or BENCH_SUITES=soak; SOAK_RUNS, SOAK_IN_FLIGHT): N runs
 * of a 20-step chain, 200 in flight, on the durable runtime (DATABASE_URL, else embedded) behind
 * the HTTP API on loopback. Every run waits once for a confirmation that a concurrent HTTP client
 * answers (it lists waiting runs and confirms them); a concurrent canceller cancels ~5% of the
 * runs at a random moment; ~5% fail after their two effects and roll back (fail_fast).
 * Asserts: every run reaches a terminal status with no lease left (none lost or stuck), every
 * effect executed at most once and exactly once in completed runs, every executed effect of a
 * rolled-back or cancelled run compensated exactly once. Prints heap and the runtime's internal
 * map sizes every second (the second half summarised: first, last, max), and p50/p99 step-start
 * latency (a chain step's start minus its predecessor's end, from the stored events). Run node
 * with --expose-gc (`node --expose-gc --import tsx bench/run.ts soak`) for heap samples taken
 * after a full collection.
 * One run in 20 is the QTable reference chain (examples/approval-system.plan.json: split → estimate ‖
 * describe → Gantt → create records, confirmed at "create"): each such run's records must be in the
 * table exactly once (the table holds exactly the records the completed runs report).
 * A wave of runs is started by a runner per slot; run latency includes the confirmation round trip.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { cachedAuthenticator } from "../src/api/auth.js";
import { createApp } from "../src/server/app.js";
import { openLive } from "../src/live/index.js";
import { defineSkill } from "../src/index.js";
import { openRuntime } from "../src/runtime/open.js";
import { PgAccessStore } from "../src/store/pg-access-store.js";
import { TERMINAL_RUN } from "../src/kernel/status.js";
import { durableTasksInFlight } from "../graphs/durable-task.js";
import type { RunControls } from "../src/kernel/controls.js";
import { loadDemoPlan } from "../src/cli/demo.js";
import { emitLine, log, maybeGc, now, round, sleep, isMain } from "./timing.js";

const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]! : null;

/** Effects and undos per run and step. */
const effects = new Map<string, number>();
const undos = new Map<string, number>();
const effectSkill = defineSkill({
  name: "soak.effect",
  description: "a counted external effect, compensable",
  input: z.object({ label: z.string() }),
  sideEffects: "external",
  idempotent: false,
  async execute(args, ctx) {
    await sleep(2);
    const k = `${ctx.runId}:${ctx.stepId}`;
    effects.set(k, (effects.get(k) ?? 0) + 1);
    return { done: args.label };
  },
  async compensate(c: { runId: string; stepId: string }) {
    const k = `${c.runId}:${c.stepId}`;
    undos.set(k, (undos.get(k) ?? 0) + 1);
  },
});

type Kind = "ok" | "fail" | "cancel" | "qtable";
/** The step each kind waits at for a human. */
const confirmStep = (k: Kind) => (k === "qtable" ? "create" : "pub");

/** 20 steps: waits, an effect (w1), waits, a confirmed effect (pub), waits, and a last step that fails for "fail" runs. */
const CHAIN = Array.from({ length: 20 }, (_, i) => (i === 8 ? "w1" : i === 14 ? "pub" : i === 19 ? "last" : `s${i}`));
function soakPlan(kind: Kind) {
  const ids = CHAIN;
  return {
    onFailure: "fail_fast",
    steps: ids.map((id, i) => {
      const dependsOn = i ? [ids[i - 1]!] : [];
      if (id === "w1") return { stepId: id, skillName: "soak.effect", dependsOn, arguments: { label: id } };
      if (id === "pub")
        return { stepId: id, skillName: "soak.effect", dependsOn, arguments: { label: id }, requireConfirmation: true };
      if (id === "last" && kind === "fail")
        return { stepId: id, skillName: "core.fail", dependsOn, arguments: {}, retry: { maxAttempts: 1 } };
      return { stepId: id, skillName: "core.wait", dependsOn, arguments: { ms: 5 } };
    }),
  };
}

export async function soakSuite(opts: { runs: number; inFlight: number }): Promise<void> {
  const url = process.env.DATABASE_URL || undefined;
  const schema = `bench_soak_${Date.now().toString(36)}`;
  const o = await openRuntime({
    databaseUrl: url,
    dataDir: ":memory:",
    schema,
    poolSize: 10,
    skills: [effectSkill],
    decisionPollMs: 200,
  });
  const backend = o.db.kind === "server" ? "postgres-server" : "postgres-embedded";
  const rt = o.runtime;
  const access = new PgAccessStore(o.db);
  await access.ensureWorkspace("soak");
  const key = (await access.createKey("soak")).key;
  const table = await o.tables!.ensureWorkspace("soak");
  const qtablePlan = loadDemoPlan() as { steps: unknown[] };
  const qtableContext = {
    goal: "Plan an approval system with multi-level sign-off, e-mail notifications and an audit log",
    table: { id: table.id },
    startDate: "2026-12-21",
    holidays: ["2026-12-25"],
  };
  const live = await openLive({ store: rt.store, db: o.db });
  const api = createApp({
    runtime: rt,
    auth: cachedAuthenticator(access),
    live,
    limits: { requestsPerMinute: 0, requestsPerMinutePerIp: 0, maxWaitMs: 600_000 },
    metrics: false,
  });
  const server = createServer(api.app);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/tool-chains`;
  const http = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: r.status, body: (r.status === 204 ? null : await r.json()) as unknown };
  };

  // the end of each run, from the store's change feed (no polling per run)
  const ended = new Map<string, () => void>();
  const unwatch = rt.store.onChange(({ runId, events }) => {
    if (events.some((e) => e.type === "run_completed" || e.type === "run_failed")) ended.get(runId)?.();
  });

  const kinds = Array.from({ length: opts.runs }, (_, i): Kind =>
    i % 20 === 7 ? "fail" : i % 20 === 13 ? "cancel" : i % 20 === 3 ? "qtable" : "ok",
  );
  const runIds: string[] = [];
  const kindOf = new Map<string, Kind>();
  const runMs: number[] = [];
  let next = 0;
  let finished = 0;
  let stop = false;
  const errors: string[] = [];

  // concurrent client 1: answers every waiting confirmation through the API
  /** runs a confirm was accepted for (a run still listed as waiting on the next page is confirmed again: an exact repeat, answered ok) */
  const confirmedRuns = new Set<string>();
  let confirmed = 0;
  const confirmer = (async () => {
    while (!stop) {
      const page = await http("GET", "/runs?status=waiting_confirmation&limit=100").catch(() => undefined);
      const waiting = (page?.body as { runs?: { runId: string }[] } | undefined)?.runs ?? [];
      // a page at a time, its confirmations in parallel (an operator console with many tabs)
      await Promise.all(
        waiting.map(async (w) => {
          const kind = kindOf.get(w.runId);
          if (!kind) return; // its runner has not recorded it yet: next page
          const r = await http("POST", `/runs/${w.runId}/confirm`, {
            stepId: confirmStep(kind),
            decision: "approve",
            wait: false,
          }).catch((e) => ({ status: 0, body: String(e) }));
          if (r.status < 300) {
            confirmed++;
            confirmedRuns.add(w.runId);
          } else if (r.status !== 409)
            errors.push(`confirm ${w.runId}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
        }),
      );
      await sleep(waiting.length ? 5 : 50);
    }
  })();
  // concurrent client 2: cancels the "cancel" runs a little after they start (some running, some
  // waiting), each at its own moment (a late cancel of a run that already ended is answered with
  // the finished view and changes nothing: counted apart)
  let cancelled = 0;
  const cancelAnswer = new Map<string, string>();
  const cancels: Promise<void>[] = [];
  const cancelLater = (id: string) =>
    setTimeout(
      () => {
        cancels.push(
          http("POST", `/runs/${id}/cancel`, { reason: "soak", wait: false }).then(
            (r) => {
              if (r.status < 300) {
                cancelled++;
                cancelAnswer.set(id, (r.body as { status?: string })?.status ?? "?");
              } else errors.push(`cancel ${id}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
            },
            (e) => void errors.push(`cancel ${id}: ${e}`),
          ),
        );
      },
      20 + Math.random() * 300,
    );

  // samples: heap and the runtime's internal maps, every second
  const samples: Record<string, number>[] = [];
  const t0 = now();
  const sampler = setInterval(() => {
    maybeGc(); // with --expose-gc the heap sample is live data, not GC timing
    const m = process.memoryUsage();
    samples.push({
      s: round((now() - t0) / 1000, 1),
      finished,
      heapMB: round(m.heapUsed / 2 ** 20, 1),
      rssMB: round(m.rss / 2 ** 20, 1),
      activeDrives: rt.activeRuns().length,
      liveControls: (rt.env.controls as RunControls).size(),
      tasksInFlight: durableTasksInFlight(),
      finishedViews: api.service.finished.size,
      benchWaiters: ended.size,
    });
  }, 1_000);

  const runner = async () => {
    while (next < kinds.length) {
      const kind = kinds[next++]!;
      const a = now();
      const h =
        kind === "qtable"
          ? rt.run(qtablePlan, { workspaceId: "soak", context: qtableContext })
          : rt.run(soakPlan(kind), { workspaceId: "soak" });
      runIds.push(h.runId);
      kindOf.set(h.runId, kind);
      const done = new Promise<void>((r) => ended.set(h.runId, r));
      if (kind === "cancel") cancelLater(h.runId);
      const first = await h.result.catch((e) => (errors.push(`run ${h.runId}: ${e}`), undefined));
      if (first && !TERMINAL_RUN.has(first.status)) await done;
      ended.delete(h.runId);
      runMs.push(now() - a);
      finished++;
    }
  };
  log(`soak: ${opts.runs} runs x 20 steps, ${opts.inFlight} in flight (${backend})`);
  const progress = setInterval(
    () => log(`  soak: ${finished}/${opts.runs} finished, ${confirmed} confirmed, ${cancelled} cancelled`),
    10_000,
  );
  await Promise.all(Array.from({ length: opts.inFlight }, runner));
  const seconds = (now() - t0) / 1000;
  clearInterval(progress);
  clearInterval(sampler);
  stop = true;
  await Promise.all([confirmer, ...cancels]);
  await rt.drain();

  // ---- checks ----
  const statusCount: Record<string, number> = {};
  const byKind: Record<string, number> = {};
  /** "cancel" runs whose cancel request was accepted (2xx) and that still completed. */
  const cancelIgnored: string[] = [];
  /** "cancel" runs whose cancel arrived after they had completed (answered with the completed view). */
  const cancelLate: string[] = [];
  const stuck: string[] = [];
  const badEffects: string[] = [];
  const startLag: number[] = [];
  /** record ids the completed QTable runs report */
  const reported: string[] = [];
  for (const id of runIds) {
    const row = await rt.store.getRow(id);
    if (!row) {
      stuck.push(`${id}: lost`);
      continue;
    }
    statusCount[row.status] = (statusCount[row.status] ?? 0) + 1;
    const kindStatus = `${kindOf.get(id)}->${row.status}`;
    byKind[kindStatus] = (byKind[kindStatus] ?? 0) + 1;
    const answer = cancelAnswer.get(id);
    if (kindOf.get(id) === "cancel" && row.status === "completed")
      (answer && !TERMINAL_RUN.has(answer as never) ? cancelIgnored : cancelLate).push(id);
    if (!TERMINAL_RUN.has(row.status) || row.leaseOwner || row.pendingConfirmations.length)
      stuck.push(`${id}: ${row.status} lease=${row.leaseOwner} pending=${row.pendingConfirmations.length}`);
    const kind = kindOf.get(id)!;
    if (kind === "qtable") {
      // its records: reported by the create step, checked against the table below
      const view = await rt.getRun(id);
      const ids =
        (view.steps.find((st) => st.stepId === "create")?.output as { recordIds?: string[] } | null)?.recordIds ?? [];
      if (row.status !== "completed" || !ids.length)
        badEffects.push(`${id} (qtable, ${row.status}): ${ids.length} records reported`);
      for (const r of ids) reported.push(r);
      continue;
    }
    for (const step of ["w1", "pub"]) {
      const k = `${id}:${step}`;
      const e = effects.get(k) ?? 0;
      const u = undos.get(k) ?? 0;
      const ok = row.status === "completed" ? e === 1 && u === 0 : e <= 1 && u === e;
      if (!ok || (kind === "ok" && row.status !== "completed"))
        badEffects.push(`${id} (${kind}, ${row.status}) ${step}: ${e} effect(s), ${u} undo(s)`);
    }
    const evs = await rt.events(id, 0);
    const at = (type: string, stepId: string) => evs.find((e) => e.type === type && e.stepId === stepId)?.at;
    for (let i = 1; i < CHAIN.length; i++) {
      if (CHAIN[i] === "pub") continue; // waits for a human
      const end = at("step_completed", CHAIN[i - 1]!);
      const start = at("step_started", CHAIN[i]!);
      if (end && start) startLag.push(Date.parse(start) - Date.parse(end));
    }
  }
  // the table holds exactly the reported records, each once
  const stored: string[] = [];
  for (let cursor: string | undefined; ;) {
    const page = (await o.tables!.listRecords("soak", table.id, { limit: 500, cursor }))!;
    stored.push(...page.records.map((r) => r.id));
    if (!page.nextCursor) break;
    cursor = page.nextCursor;
  }
  const storedSet = new Set(stored);
  if (
    stored.length !== reported.length ||
    reported.some((r) => !storedSet.has(r)) ||
    new Set(reported).size !== reported.length
  ) {
    badEffects.push(
      `qtable: ${reported.length} records reported by completed runs, ${stored.length} in the table (${storedSet.size} distinct)`,
    );
  }
  const half = samples.slice(Math.floor(samples.length / 2));
  const summary = (k: string) => ({
    first: half[0]?.[k],
    last: half.at(-1)?.[k],
    max: Math.max(...half.map((s) => s[k]!)),
  });
  const after = {
    activeDrives: rt.activeRuns().length,
    liveControls: (rt.env.controls as RunControls).size(),
    tasksInFlight: durableTasksInFlight(),
    benchWaiters: ended.size,
  };
  emitLine({
    suite: "soak",
    backend,
    runs: opts.runs,
    stepsPerRun: 20,
    inFlight: opts.inFlight,
    seconds: round(seconds, 1),
    runsPerSec: round(opts.runs / seconds, 2),
    stepsPerSec: round(kinds.reduce((n, k) => n + (k === "qtable" ? qtablePlan.steps.length : 20), 0) / seconds, 1),
    statuses: statusCount,
    kindToStatus: byKind,
    cancelAcceptedButCompleted: cancelIgnored.length,
    cancelAfterCompletion: cancelLate.length,
    confirmedByClient: { runs: confirmedRuns.size, requests: confirmed },
    cancelledByClient: cancelled,
    lostOrStuck: stuck.length,
    effectViolations: badEffects.length,
    qtable: {
      runs: kinds.filter((k) => k === "qtable").length,
      recordsReported: reported.length,
      recordsInTable: stored.length,
    },
    clientErrors: errors.length,
    stepStartLatencyMs: {
      p50: pct(startLag, 50),
      p99: pct(startLag, 99),
      max: startLag.length ? Math.max(...startLag) : null,
      samples: startLag.length,
    },
    runLatencyMs: { p50: round(pct(runMs, 50) ?? 0, 0), p99: round(pct(runMs, 99) ?? 0, 0) },
    secondHalf: {
      heapMB: summary("heapMB"),
      rssMB: summary("rssMB"),
      activeDrives: summary("activeDrives"),
      liveControls: summary("liveControls"),
      tasksInFlight: summary("tasksInFlight"),
      finishedViews: summary("finishedViews"),
    },
    afterDrain: after,
  });
  for (const s of half) process.stderr.write(`[bench]   sample ${JSON.stringify(s)}\n`);
  for (const x of [...stuck, ...badEffects, ...errors].slice(0, 20)) log(`  PROBLEM ${x}`);
  for (const id of cancelIgnored.slice(0, 5)) {
    const evs = await rt.events(id, 0);
    log(
      `  cancel accepted (answer: ${cancelAnswer.get(id)}) but the run completed: ${id}: ${evs.map((e) => `${e.type}${e.stepId ? `:${e.stepId}` : ""}`).join(" ")}`,
    );
  }
  unwatch();
  await api.close();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  await live.close();
  if (o.db.kind === "server") await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
  await o.close();
  const leaked = Object.values(after).some((n) => n !== 0);
  if (stuck.length || badEffects.length || errors.length || leaked || cancelIgnored.length) {
    throw new Error(
      `soak failed: ${stuck.length} lost or stuck, ${badEffects.length} effect violations, ${errors.length} client errors, ${cancelIgnored.length} accepted cancels ignored, maps after drain ${JSON.stringify(after)}`,
    );
  }
}

if (isMain("soak")) {
  await soakSuite({
    runs: Number(process.env.SOAK_RUNS ?? process.argv[2] ?? 20),
    inFlight: Number(process.env.SOAK_IN_FLIGHT ?? 10),
  });
  process.exit(0);
}
