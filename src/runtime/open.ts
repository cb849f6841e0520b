/**
 * A durable runtime from configuration: server Postgres when `databaseUrl` (DATABASE_URL) is set,
 * otherwise embedded Postgres in `dataDir` (TOOLCHAIN_DATA_DIR, default ./.data/pglite, or
 * ./.data/postgres with TOOLCHAIN_EMBEDDED_ENGINE=postgres).
 * Migrations and LangGraph's checkpoint setup run on open.
 */
import type { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { compiledPlanCache } from "../../graphs/env.js";
import { defaultDataDir, openDatabase, type Database, type EmbeddedEngine } from "../store/db.js";
import { migrate } from "../store/migrations.js";
import { PgLimits } from "../store/limits-store.js";
import { PgRunStore } from "../store/pg-run-store.js";
import { BatchedPostgresSaver } from "../store/saver.js";
import { SkillRegistry } from "../skills/registry.js";
import { Planner, plannerConfigFromEnv } from "../planner/index.js";
import { modelTaskEstimator } from "../planner/task-estimator.js";
import { modelTaskSplitter } from "../planner/task-splitter.js";
import {
  migrateQTable,
  PgTableStore,
  qtableSkills,
  tableLimitsFromEnv,
  type QTableOptions,
  type TableStore,
} from "../../skills/qtable/index.js";
import { Runtime, type RuntimeOptions } from "./runtime.js";
import { defaultOwner } from "./run-limits.js";

export interface OpenRuntimeOptions extends Omit<RuntimeOptions, "checkpointer" | "store"> {
  databaseUrl?: string;
  /** Embedded data directory; `":memory:"` keeps it in memory. */
  dataDir?: string;
  schema?: string;
  poolSize?: number;
  /** Embedded engine. @default TOOLCHAIN_EMBEDDED_ENGINE, else "pglite" */
  engine?: EmbeddedEngine;
  /**
   * The QTable skill pack (skills/qtable) on this database: its tables are migrated and its skills
   * registered. `false` leaves it out; an object passes the model seams (splitWith, estimateWith).
   * @default true
   */
  qtable?: boolean | Omit<QTableOptions, "store">;
}

export interface OpenedRuntime {
  runtime: Runtime;
  db: Database;
  saver: PostgresSaver;
  /** The QTable store (absent with `qtable: false`). */
  tables?: TableStore;
  close(): Promise<void>;
}

export async function openRuntime(opts: OpenRuntimeOptions = {}): Promise<OpenedRuntime> {
  const url = opts.databaseUrl ?? process.env.DATABASE_URL;
  const dataDir = opts.dataDir ?? process.env.TOOLCHAIN_DATA_DIR ?? defaultDataDir();
  const schema = opts.schema ?? process.env.TOOLCHAIN_SCHEMA;
  const db = await openDatabase({
    url: url || undefined,
    dataDir: dataDir === ":memory:" ? undefined : dataDir,
    schema,
    poolSize: opts.poolSize,
    engine: opts.engine,
  });
  try {
    const saver = new BatchedPostgresSaver(db.pool, undefined, { schema: db.schema });
    await migrate(db, saver);
    let tables: TableStore | undefined;
    let skills = opts.skills;
    if (opts.qtable !== false) {
      await migrateQTable(db);
      // quotas and bounds: TOOLCHAIN_MAX_TABLES_PER_WORKSPACE and the others (skills/qtable/limits.ts)
      tables = new PgTableStore(db, { limits: tableLimitsFromEnv() });
      // qtable.task.split and .estimate use the planner's model (one configuration) when one is configured
      const plannerOpts =
        opts.planner instanceof Planner ? opts.planner.config : { ...plannerConfigFromEnv(), ...opts.planner };
      const splitWith = modelTaskSplitter(plannerOpts);
      const estimateWith = modelTaskEstimator(plannerOpts);
      const pack = qtableSkills({
        ...(splitWith ? { splitWith } : {}),
        ...(estimateWith ? { estimateWith } : {}),
        ...(typeof opts.qtable === "object" ? opts.qtable : {}),
        store: tables,
      });
      if (skills instanceof SkillRegistry) {
        for (const s of pack) if (!skills.has(s.name)) skills.register(s);
      } else {
        // a skill the caller passes under a pack name replaces the pack's
        const own = skills ?? [];
        skills = [...pack.filter((p) => !own.some((s) => s.name === p.name)), ...own];
      }
    }
    const leaseTtlMs =
      opts.leaseTtlMs ?? (process.env.TOOLCHAIN_LEASE_TTL_MS ? Number(process.env.TOOLCHAIN_LEASE_TTL_MS) : undefined);
    const owner = opts.owner ?? defaultOwner();
    // serial keys and resources hold across every process on this database
    const limits = opts.limits ?? new PgLimits(db, { owner, leaseTtlMs });
    const planBytes = process.env.TOOLCHAIN_PLAN_CACHE_BYTES
      ? Number(process.env.TOOLCHAIN_PLAN_CACHE_BYTES)
      : undefined;
    const env =
      planBytes !== undefined && opts.env?.compiledPlans === undefined
        ? { ...opts.env, compiledPlans: compiledPlanCache(planBytes) }
        : opts.env;
    const runtime = new Runtime({
      ...opts,
      skills,
      env,
      owner,
      leaseTtlMs,
      limits,
      checkpointer: saver,
      store: new PgRunStore(db),
    });
    return {
      runtime,
      db,
      saver,
      tables,
      async close() {
        await runtime.drain();
        await limits.close();
        await db.close();
      },
    };
  } catch (e) {
    await db.close();
    throw e;
  }
}
