import pg from "pg";
/**
 * Versioned migrations: an ordered list whose index is the version. Applied on start inside one
 * transaction under an advisory lock, so replicas starting together apply each version once.
 * LangGraph's checkpoint tables come from PostgresSaver.setup(), run under the same lock.
 */
import type { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { table, type Database } from "./db.js";

export function migrations(db: Pick<Database, "schema">): string[] {
  const t = (n: string) => table(db, n);
  return [
    // 0: run history
    `CREATE TABLE ${t("tool_chain_runs")} (
      run_id text PRIMARY KEY,
      workspace_id text NOT NULL DEFAULT 'default',
      status text NOT NULL,
      plan jsonb NOT NULL,
      context jsonb NOT NULL DEFAULT '{}'::jsonb,
      memory jsonb NOT NULL DEFAULT '{}'::jsonb,
      result jsonb,
      error jsonb,
      trace_id text NOT NULL,
      pending_confirmations jsonb NOT NULL DEFAULT '[]'::jsonb,
      last_seq bigint NOT NULL DEFAULT 0,
      lease_owner text,
      lease_expires_at timestamptz,
      checkpoint_pruned_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz
    );
    CREATE INDEX tool_chain_runs_ws_created ON ${t("tool_chain_runs")} (workspace_id, created_at DESC, run_id DESC);
    CREATE INDEX tool_chain_runs_active ON ${t("tool_chain_runs")} (lease_expires_at) WHERE status IN ('queued', 'planning', 'running');
    CREATE TABLE ${t("tool_chain_step_runs")} (
      run_id text NOT NULL REFERENCES ${t("tool_chain_runs")} ON DELETE CASCADE,
      step_id text NOT NULL,
      skill_name text NOT NULL,
      status text NOT NULL,
      depends_on jsonb NOT NULL DEFAULT '[]'::jsonb,
      input jsonb,
      output jsonb,
      attempts int NOT NULL DEFAULT 0,
      error_code text,
      error_message text,
      rollback_status text,
      rollback_error jsonb,
      context_snapshot jsonb,
      started_at timestamptz,
      finished_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (run_id, step_id)
    );
    CREATE TABLE ${t("tool_chain_event_logs")} (
      run_id text NOT NULL REFERENCES ${t("tool_chain_runs")} ON DELETE CASCADE,
      seq bigint NOT NULL,
      type text NOT NULL,
      step_id text,
      key text NOT NULL,
      data jsonb NOT NULL,
      at timestamptz NOT NULL,
      PRIMARY KEY (run_id, seq),
      UNIQUE (run_id, key)
    );
    CREATE TABLE ${t("tool_chain_decisions")} (
      run_id text NOT NULL REFERENCES ${t("tool_chain_runs")} ON DELETE CASCADE,
      step_id text NOT NULL,
      round int NOT NULL,
      decision jsonb NOT NULL,
      applied boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (run_id, step_id, round)
    );`,
    // 1: "attempt n of this step may have started its effect" (written before a non-idempotent effect)
    `CREATE TABLE ${t("tool_chain_step_intents")} (
      run_id text NOT NULL REFERENCES ${t("tool_chain_runs")} ON DELETE CASCADE,
      step_id text NOT NULL,
      attempt int NOT NULL,
      owner text,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (run_id, step_id, attempt)
    );`,
    // 2: API access: workspaces (skill allowlist; NULL = every skill) and their keys (sha256 of the key only)
    `CREATE TABLE ${t("tool_chain_workspaces")} (
      workspace_id text PRIMARY KEY,
      allowed_skills jsonb,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE ${t("tool_chain_api_keys")} (
      key_id text PRIMARY KEY,
      workspace_id text NOT NULL REFERENCES ${t("tool_chain_workspaces")} ON DELETE CASCADE,
      key_sha256 text NOT NULL UNIQUE,
      key_prefix text NOT NULL,
      label text,
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz
    );
    CREATE INDEX tool_chain_api_keys_ws ON ${t("tool_chain_api_keys")} (workspace_id);`,
    // 3: runs started from a request: what to plan (request, allowlist) and which planner wrote the plan
    `ALTER TABLE ${t("tool_chain_runs")} ADD COLUMN planning_input jsonb, ADD COLUMN planning jsonb;`,
    // 4: durable cancel requests (picked up by the executing process like decisions) and bounded
    // re-drives: consecutive drive failures, the earliest next attempt (per-run backoff), the last error
    `ALTER TABLE ${t("tool_chain_runs")}
       ADD COLUMN cancel_reason text,
       ADD COLUMN cancel_requested_at timestamptz,
       ADD COLUMN drive_failures int NOT NULL DEFAULT 0,
       ADD COLUMN next_attempt_at timestamptz,
       ADD COLUMN last_drive_error jsonb;`,
    // 5: where a key comes from: "configured" (TOOLCHAIN_API_KEYS, kept in sync with it on every
    // start) or "created" (`keys create`, the dev key: never touched by the configuration)
    `ALTER TABLE ${t("tool_chain_api_keys")} ADD COLUMN source text NOT NULL DEFAULT 'created';
    UPDATE ${t("tool_chain_api_keys")} SET source = 'configured' WHERE label = 'configured';`,
    // 6: limits across runs and processes (src/store/limits-store.ts): holders with leases, a FIFO
    // of waiters (a waiter that stops renewing drops out), recent starts for perSecond rates, and
    // one function that tries to take a limit in a single round trip
    `CREATE TABLE ${t("tool_chain_limit_holders")} (
      limit_key text NOT NULL,
      holder_id text NOT NULL,
      owner text NOT NULL,
      run_id text NOT NULL,
      step_id text NOT NULL,
      acquired_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (limit_key, holder_id)
    );
    CREATE INDEX tool_chain_limit_holders_owner ON ${t("tool_chain_limit_holders")} (owner);
    CREATE TABLE ${t("tool_chain_limit_waiters")} (
      limit_key text NOT NULL,
      holder_id text NOT NULL,
      owner text NOT NULL,
      seq bigserial NOT NULL,
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (limit_key, holder_id)
    );
    CREATE INDEX tool_chain_limit_waiters_fifo ON ${t("tool_chain_limit_waiters")} (limit_key, seq);
    CREATE INDEX tool_chain_limit_waiters_owner ON ${t("tool_chain_limit_waiters")} (owner);
    CREATE TABLE ${t("tool_chain_limit_starts")} (limit_key text NOT NULL, started_at timestamptz NOT NULL);
    CREATE INDEX tool_chain_limit_starts_key ON ${t("tool_chain_limit_starts")} (limit_key, started_at);
    -- 0: taken; -1: wait for a release; n > 0: the rate window opens in n ms
    CREATE FUNCTION ${t("tool_chain_limit_try")}(p_key text, p_holder text, p_owner text, p_run text, p_step text, p_limit int, p_per_second int, p_ttl_ms int)
    RETURNS int LANGUAGE plpgsql AS $fn$
    DECLARE
      v_now timestamptz := clock_timestamp();
      v_ttl interval := p_ttl_ms * interval '1 millisecond';
      v_seq bigint;
      v_held int;
      v_ahead int;
      v_starts int;
      v_oldest timestamptz;
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtext('tool_chain_limit'), hashtext(p_key));
      DELETE FROM ${t("tool_chain_limit_holders")} WHERE limit_key = p_key AND expires_at < v_now;
      DELETE FROM ${t("tool_chain_limit_waiters")} WHERE limit_key = p_key AND expires_at < v_now;
      INSERT INTO ${t("tool_chain_limit_waiters")} (limit_key, holder_id, owner, expires_at) VALUES (p_key, p_holder, p_owner, v_now + v_ttl)
        ON CONFLICT (limit_key, holder_id) DO UPDATE SET expires_at = EXCLUDED.expires_at
        RETURNING seq INTO v_seq;
      SELECT count(*) INTO v_held FROM ${t("tool_chain_limit_holders")} WHERE limit_key = p_key;
      SELECT count(*) INTO v_ahead FROM ${t("tool_chain_limit_waiters")} WHERE limit_key = p_key AND seq < v_seq;
      IF v_held + v_ahead >= p_limit THEN
        RETURN -1;
      END IF;
      IF p_per_second IS NOT NULL THEN
        DELETE FROM ${t("tool_chain_limit_starts")} WHERE limit_key = p_key AND started_at <= v_now - interval '1 second';
        SELECT count(*) INTO v_starts FROM ${t("tool_chain_limit_starts")} WHERE limit_key = p_key;
        IF v_starts >= p_per_second THEN
          SELECT started_at INTO v_oldest FROM ${t("tool_chain_limit_starts")} WHERE limit_key = p_key ORDER BY started_at DESC OFFSET p_per_second - 1 LIMIT 1;
          RETURN greatest(1, ceil(extract(epoch FROM (v_oldest + interval '1 second' - v_now)) * 1000))::int;
        END IF;
        INSERT INTO ${t("tool_chain_limit_starts")} (limit_key, started_at) VALUES (p_key, v_now);
      END IF;
      DELETE FROM ${t("tool_chain_limit_waiters")} WHERE limit_key = p_key AND holder_id = p_holder;
      INSERT INTO ${t("tool_chain_limit_holders")} (limit_key, holder_id, owner, run_id, step_id, expires_at) VALUES (p_key, p_holder, p_owner, p_run, p_step, v_now + v_ttl);
      RETURN 0;
    END
    $fn$;`,
    // 7: who wrote the run's plan (person / model / agent, and through which surface) and the
    // clamps applied at admission (src/plan/admission.ts)
    `ALTER TABLE ${t("tool_chain_runs")} ADD COLUMN admission jsonb;`,
    // 8: what a key may do beyond running, reading and deciding (e.g. "relax_confirmation")
    `ALTER TABLE ${t("tool_chain_api_keys")} ADD COLUMN permissions jsonb NOT NULL DEFAULT '[]'::jsonb;`,
    // 9: personal keys (the person and their roles) and who asked for a cancel (src/kernel/actor.ts)
    `ALTER TABLE ${t("tool_chain_api_keys")} ADD COLUMN key_user jsonb;
    ALTER TABLE ${t("tool_chain_runs")} ADD COLUMN cancel_by jsonb;`,
    // 10: a quorum's approvals, one per (step, round, principal), durable before the quorum completes
    `CREATE TABLE ${t("tool_chain_approvals")} (
      run_id text NOT NULL REFERENCES ${t("tool_chain_runs")} ON DELETE CASCADE,
      step_id text NOT NULL,
      round int NOT NULL,
      principal text NOT NULL,
      decision jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      PRIMARY KEY (run_id, step_id, round, principal)
    );`,
    // 11: the run's W3C trace context (traceparent / tracestate): every drive, in any process, continues its trace
    `ALTER TABLE ${t("tool_chain_runs")} ADD COLUMN trace_context jsonb;`,
    // 12: approval expiries handled (one per wait, whichever process got there first); the deadline
    // itself is in the run row's pending confirmations (expiresAt), found through the partial index
    `CREATE TABLE ${t("tool_chain_approval_expiries")} (
      run_id text NOT NULL REFERENCES ${t("tool_chain_runs")} ON DELETE CASCADE,
      step_id text NOT NULL,
      round int NOT NULL,
      outcome text NOT NULL,
      expired_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      PRIMARY KEY (run_id, step_id, round)
    );
    CREATE INDEX tool_chain_runs_pending ON ${t("tool_chain_runs")} (run_id) WHERE pending_confirmations <> '[]'::jsonb;`,
  ];
}

const LOCK_KEY = 7_310_021; // arbitrary, constant: "toolchain migrations"
const SCHEMA_LOCK_KEY = 7_310_020; // creating the schema (any migration list)

export async function migrate(db: Database, saver?: PostgresSaver): Promise<void> {
  await applyMigrations(db, { lockKey: LOCK_KEY, versionTable: "toolchain_migrations", list: migrations(db) });
  if (saver) await setupSaver(db, saver);
}

/**
 * Apply an ordered list of migrations (index = version) in one transaction under an advisory
 * lock, so several processes can start together. Used by the runtime and by skill packs that
 * keep their own tables (skills/qtable).
 */
export async function applyMigrations(
  db: Database,
  o: { lockKey: number; versionTable: string; list: string[] },
): Promise<void> {
  const client = await db.pool.connect();
  try {
    await client.query("BEGIN");
    // CREATE SCHEMA IF NOT EXISTS is not safe against itself (two at once: a unique violation on
    // pg_namespace); one lock per schema shared by every migration list serialises it
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [SCHEMA_LOCK_KEY, db.schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${db.schema}"`);
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [o.lockKey, db.schema]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${table(db, o.versionTable)} (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const { rows } = await client.query<{ v: number | null }>(
      `SELECT max(version) AS v FROM ${table(db, o.versionTable)}`,
    );
    for (let v = (rows[0]?.v ?? -1) + 1; v < o.list.length; v++) {
      await client.query(o.list[v]!);
      await client.query(`INSERT INTO ${table(db, o.versionTable)} (version) VALUES ($1)`, [v]);
    }
    await client.query("COMMIT");
  } catch (e) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw e;
  } finally {
    client.release();
  }
}

/** PostgresSaver.setup() is not safe to run from several processes at once: serialise it. */
async function setupSaver(db: Database, saver: PostgresSaver): Promise<void> {
  if (!db.shared) return saver.setup(); // one process, one connection
  // the lock is held on a connection of its own: saver.setup() needs the pool, which may have one
  const lock = new pg.Client((db.pool as unknown as { options: pg.ClientConfig }).options);
  await lock.connect();
  try {
    await lock.query("SELECT pg_advisory_lock($1, hashtext($2))", [LOCK_KEY + 1, db.schema]);
    await saver.setup();
  } finally {
    await lock.query("SELECT pg_advisory_unlock($1, hashtext($2))", [LOCK_KEY + 1, db.schema]).catch(() => undefined);
    await lock.end().catch(() => undefined);
  }
}
