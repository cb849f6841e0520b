/** AccessStore on Postgres (server or embedded): plain SQL over tool_chain_workspaces / tool_chain_api_keys. */
import { table, type Database } from "./db.js";
import {
  assertSkillPatterns,
  assertWorkspaceId,
  hashApiKey,
  keyPrefix,
  newApiKey,
  newKeyId,
  type AccessStore,
  type ApiKeyInfo,
  assertKeyUser,
  type ConfiguredKey,
  type CreateKeyOptions,
  type Principal,
  type Workspace,
} from "./access-store.js";

interface KeyRow {
  key_id: string;
  workspace_id: string;
  key_prefix: string;
  label: string | null;
  created_at: Date;
  revoked_at: Date | null;
  key_user: { id: string } | null;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
const toInfo = (r: KeyRow): ApiKeyInfo => ({
  keyId: r.key_id,
  workspaceId: r.workspace_id,
  prefix: r.key_prefix,
  label: r.label,
  createdAt: iso(r.created_at)!,
  revokedAt: iso(r.revoked_at),
  ...(r.key_user ? { userId: r.key_user.id } : {}),
});

export class PgAccessStore implements AccessStore {
  private readonly ws: string;
  private readonly keys: string;

  constructor(private readonly db: Database) {
    this.ws = table(db, "tool_chain_workspaces");
    this.keys = table(db, "tool_chain_api_keys");
  }

  async ensureWorkspace(workspaceId: string, opts: { allowedSkills?: string[] | null } = {}): Promise<Workspace> {
    assertWorkspaceId(workspaceId);
    if (opts.allowedSkills) assertSkillPatterns(opts.allowedSkills);
    const set = opts.allowedSkills !== undefined;
    const { rows } = await this.db.pool.query(
      `INSERT INTO ${this.ws} (workspace_id, allowed_skills) VALUES ($1, $2::jsonb)
       ON CONFLICT (workspace_id) DO UPDATE SET allowed_skills = CASE WHEN $3 THEN EXCLUDED.allowed_skills ELSE ${this.ws}.allowed_skills END
       RETURNING workspace_id, allowed_skills, created_at`,
      [workspaceId, JSON.stringify(opts.allowedSkills ?? null), set],
    );
    const r = rows[0];
    return { workspaceId: r.workspace_id, allowedSkills: r.allowed_skills, createdAt: iso(r.created_at)! };
  }

  async getWorkspace(workspaceId: string): Promise<Workspace | undefined> {
    const { rows } = await this.db.pool.query(
      `SELECT workspace_id, allowed_skills, created_at FROM ${this.ws} WHERE workspace_id = $1`,
      [workspaceId],
    );
    const r = rows[0];
    return r
      ? { workspaceId: r.workspace_id, allowedSkills: r.allowed_skills, createdAt: iso(r.created_at)! }
      : undefined;
  }

  async createKey(workspaceId: string, opts: CreateKeyOptions = {}): Promise<{ key: string; info: ApiKeyInfo }> {
    if (opts.user) assertKeyUser(opts.user);
    if (!(await this.getWorkspace(workspaceId))) throw new TypeError(`workspace "${workspaceId}" does not exist`);
    const key = opts.key ?? newApiKey();
    // a configured key imported again is the same key: keep the first row
    await this.db.pool.query(
      `INSERT INTO ${this.keys} (key_id, workspace_id, key_sha256, key_prefix, label, permissions, key_user) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb) ON CONFLICT (key_sha256) DO NOTHING`,
      [
        newKeyId(),
        workspaceId,
        hashApiKey(key),
        keyPrefix(key),
        opts.label ?? null,
        JSON.stringify(opts.permissions ?? []),
        opts.user ? JSON.stringify(opts.user) : null,
      ],
    );
    const { rows } = await this.db.pool.query<KeyRow>(`SELECT * FROM ${this.keys} WHERE key_sha256 = $1`, [
      hashApiKey(key),
    ]);
    return { key, info: toInfo(rows[0]!) };
  }

  async listKeys(workspaceId?: string): Promise<ApiKeyInfo[]> {
    const { rows } = await this.db.pool.query<KeyRow>(
      `SELECT * FROM ${this.keys} WHERE $1::text IS NULL OR workspace_id = $1 ORDER BY created_at, key_id`,
      [workspaceId ?? null],
    );
    return rows.map(toInfo);
  }

  async revokeKey(keyId: string): Promise<boolean> {
    const { rowCount } = await this.db.pool.query(
      `UPDATE ${this.keys} SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL`,
      [keyId],
    );
    return rowCount === 1;
  }

  async authenticate(key: string): Promise<Principal | undefined> {
    const { rows } = await this.db.pool.query(
      `SELECT k.key_id, k.workspace_id, k.permissions, k.key_user, w.allowed_skills FROM ${this.keys} k JOIN ${this.ws} w USING (workspace_id)
       WHERE k.key_sha256 = $1 AND k.revoked_at IS NULL`,
      [hashApiKey(key)],
    );
    const r = rows[0];
    return r
      ? {
          workspaceId: r.workspace_id,
          keyId: r.key_id,
          allowedSkills: r.allowed_skills,
          permissions: r.permissions ?? [],
          ...(r.key_user ? { user: r.key_user } : {}),
        }
      : undefined;
  }

  async countKeys(opts: { includeRevoked?: boolean } = {}): Promise<number> {
    const { rows } = await this.db.pool.query(`SELECT count(*) AS n FROM ${this.keys} WHERE $1 OR revoked_at IS NULL`, [
      opts.includeRevoked === true,
    ]);
    return Number(rows[0].n);
  }

  async syncConfiguredKeys(keys: readonly ConfiguredKey[]): Promise<{ active: number; revoked: number }> {
    for (const c of keys) {
      await this.ensureWorkspace(c.workspace, c.skills ? { allowedSkills: c.skills } : {});
      // a configured key follows the configuration (workspace, revocation); a created one is left alone
      await this.db.pool.query(
        `INSERT INTO ${this.keys} (key_id, workspace_id, key_sha256, key_prefix, label, source, permissions, key_user) VALUES ($1, $2, $3, $4, 'configured', 'configured', $5::jsonb, $6::jsonb)
         ON CONFLICT (key_sha256) DO UPDATE SET workspace_id = EXCLUDED.workspace_id, revoked_at = NULL, permissions = EXCLUDED.permissions, key_user = EXCLUDED.key_user
         WHERE ${this.keys}.source = 'configured'`,
        [
          newKeyId(),
          c.workspace,
          hashApiKey(c.key),
          keyPrefix(c.key),
          JSON.stringify(c.permissions ?? []),
          c.user ? JSON.stringify(c.user) : null,
        ],
      );
    }
    const { rowCount } = await this.db.pool.query(
      `UPDATE ${this.keys} SET revoked_at = now() WHERE source = 'configured' AND revoked_at IS NULL AND NOT (key_sha256 = ANY($1::text[]))`,
      [keys.map((c) => hashApiKey(c.key))],
    );
    return { active: keys.length, revoked: rowCount ?? 0 };
  }
}
