/**
 * API access: workspaces (each with a skill allowlist) and their API keys. A key is shown once,
 * when it is created; only its sha256 is stored (keys are 256 random bits, so a fast hash is
 * enough: there is nothing to brute-force).
 */
import { createHash, randomBytes } from "node:crypto";
import { ROLES, USER_ID, type Actor, type ActorKind, type Role } from "../kernel/actor.js";

export interface Workspace {
  workspaceId: string;
  /** Skill names or `pack.*` patterns; null: every registered skill. */
  allowedSkills: string[] | null;
  createdAt: string;
}

export interface ApiKeyInfo {
  keyId: string;
  workspaceId: string;
  /** The key's first characters, to recognise it. */
  prefix: string;
  label: string | null;
  createdAt: string;
  revokedAt: string | null;
  /** A personal key's user id. */
  userId?: string;
}

/** What a key may do beyond running, reading and deciding. */
export type KeyPermission = "relax_confirmation";
export const KEY_PERMISSIONS: readonly KeyPermission[] = ["relax_confirmation"];

/** A personal key's person: decisions made with the key are theirs. */
export interface KeyUser {
  id: string;
  name?: string;
  /** Roles in the key's workspace; absent: every power (like a key without a user). */
  roles?: Role[];
}

/** Who is calling: resolved from a key (or a signed-in token, src/api/oidc.ts). */
export interface Principal {
  workspaceId: string;
  keyId: string;
  allowedSkills: string[] | null;
  /** `relax_confirmation`: plans sent with this key may say `requireConfirmation: false` where the skill allows it. */
  permissions?: readonly KeyPermission[];
  /** The person behind a personal key or a token; absent: a service key. */
  user?: KeyUser;
  /** @default "service" (or "user" when `user` is set) */
  kind?: ActorKind;
}

/** The principal as the run history records it. */
export function actorOf(p: Principal): Actor {
  if (p.user) return { kind: p.kind ?? "user", id: p.user.id, ...(p.user.name ? { name: p.user.name } : {}) };
  return { kind: p.kind ?? "service", id: p.keyId };
}

/** The principal's roles; undefined: every power. */
export function rolesOf(p: Principal): readonly Role[] | undefined {
  return p.user?.roles;
}

/** A key's user as configured or given to `keys create`; throws naming the field. */
export function assertKeyUser(u: unknown, field = "user"): asserts u is KeyUser {
  if (typeof u !== "object" || u === null || Array.isArray(u))
    throw new TypeError(`${field}: expected { id, name?, roles? }`);
  const o = u as Record<string, unknown>;
  if (typeof o.id !== "string" || !USER_ID.test(o.id)) throw new TypeError(`${field}.id: expected to match ${USER_ID}`);
  if (o.name !== undefined && (typeof o.name !== "string" || o.name.length > 200 || /[\u0000-\u001f]/.test(o.name)))
    throw new TypeError(`${field}.name: expected a string of at most 200 printable characters`);
  if (o.roles !== undefined && (!Array.isArray(o.roles) || o.roles.some((r) => !ROLES.includes(r as Role))))
    throw new TypeError(`${field}.roles: expected a list of ${ROLES.join(", ")}`);
  const extra = Object.keys(o).find((k) => !["id", "name", "roles"].includes(k));
  if (extra) throw new TypeError(`${field}.${extra}: unknown field`);
}

export interface AccessStore {
  /** Creates the workspace if missing; sets its allowlist when `allowedSkills` is given (null: every skill). */
  ensureWorkspace(workspaceId: string, opts?: { allowedSkills?: string[] | null }): Promise<Workspace>;
  getWorkspace(workspaceId: string): Promise<Workspace | undefined>;
  /** A new key (or `key`, a configured one, imported idempotently) for an existing workspace. */
  createKey(workspaceId: string, opts?: CreateKeyOptions): Promise<{ key: string; info: ApiKeyInfo }>;
  listKeys(workspaceId?: string): Promise<ApiKeyInfo[]>;
  /** false when no such key (or already revoked). */
  revokeKey(keyId: string): Promise<boolean>;
  authenticate(key: string): Promise<Principal | undefined>;
  /** Keys not revoked (`includeRevoked`: every key ever created). */
  countKeys(opts?: { includeRevoked?: boolean }): Promise<number>;
  /**
   * Make the configured keys (TOOLCHAIN_API_KEYS) the truth: each exists, active, in its
   * workspace (whose allowlist is set when `skills` is given); configured keys no longer in the
   * list are revoked. Keys created with `keys create` are never touched.
   */
  syncConfiguredKeys(keys: readonly ConfiguredKey[]): Promise<{ active: number; revoked: number }>;
}

export interface CreateKeyOptions {
  label?: string;
  key?: string;
  permissions?: readonly KeyPermission[];
  /** A personal key: its decisions are this person's. */
  user?: KeyUser;
}

export interface ConfiguredKey {
  workspace: string;
  /** The key itself; it is stored hashed. */
  key: string;
  /** Skill allowlist of the workspace (names or `pack.*`); absent: unchanged (new workspaces: every skill). */
  skills?: string[];
  /** e.g. ["relax_confirmation"]; absent: none. */
  permissions?: KeyPermission[];
  /** A personal key: `{ id, name?, roles? }`. */
  user?: KeyUser;
}

export const WORKSPACE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const KEY_PREFIX = "tck_";

export function assertWorkspaceId(id: string): void {
  if (!WORKSPACE_ID.test(id)) throw new TypeError(`Expected workspace id to match ${WORKSPACE_ID}, got "${id}"`);
}

export function assertSkillPatterns(list: readonly string[]): void {
  for (const p of list) {
    if (!/^(\*|[A-Za-z0-9_.-]+(\.\*)?)$/.test(p))
      throw new TypeError(`Expected a skill name or "pack.*" pattern, got "${p}"`);
  }
}

export function newApiKey(): string {
  return KEY_PREFIX + randomBytes(32).toString("base64url");
}
export function newKeyId(): string {
  return `key_${randomBytes(6).toString("hex")}`;
}
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}
export function keyPrefix(key: string): string {
  return key.slice(0, KEY_PREFIX.length + 6);
}

/** The allowlist as a predicate (undefined: everything allowed). `pack.*` matches a skill pack, `*` everything. */
export function skillMatcher(allowed: readonly string[] | null): ((name: string) => boolean) | undefined {
  if (allowed === null) return undefined;
  const exact = new Set(allowed.filter((p) => !p.endsWith("*")));
  const packs = allowed.filter((p) => p.endsWith(".*")).map((p) => p.slice(0, -1));
  if (allowed.includes("*")) return undefined;
  return (name) => exact.has(name) || packs.some((p) => name.startsWith(p));
}

/** In-process AccessStore: for library use and tests without a database. */
export class MemoryAccessStore implements AccessStore {
  private readonly workspaces = new Map<string, Workspace>();
  private readonly keys = new Map<
    string,
    ApiKeyInfo & {
      hash: string;
      source: "configured" | "created";
      permissions: readonly KeyPermission[];
      user?: KeyUser;
    }
  >();

  async ensureWorkspace(workspaceId: string, opts: { allowedSkills?: string[] | null } = {}): Promise<Workspace> {
    assertWorkspaceId(workspaceId);
    if (opts.allowedSkills) assertSkillPatterns(opts.allowedSkills);
    const ws = this.workspaces.get(workspaceId) ?? {
      workspaceId,
      allowedSkills: null,
      createdAt: new Date().toISOString(),
    };
    if (opts.allowedSkills !== undefined) ws.allowedSkills = opts.allowedSkills ? [...opts.allowedSkills] : null;
    this.workspaces.set(workspaceId, ws);
    return { ...ws };
  }
  async getWorkspace(workspaceId: string): Promise<Workspace | undefined> {
    const ws = this.workspaces.get(workspaceId);
    return ws ? { ...ws } : undefined;
  }
  async createKey(workspaceId: string, opts: CreateKeyOptions = {}): Promise<{ key: string; info: ApiKeyInfo }> {
    if (opts.user) assertKeyUser(opts.user);
    if (!this.workspaces.has(workspaceId)) throw new TypeError(`workspace "${workspaceId}" does not exist`);
    const key = opts.key ?? newApiKey();
    const hash = hashApiKey(key);
    const existing = [...this.keys.values()].find((k) => k.hash === hash);
    if (existing) return { key, info: strip(existing) };
    const info = {
      keyId: newKeyId(),
      workspaceId,
      prefix: keyPrefix(key),
      label: opts.label ?? null,
      createdAt: new Date().toISOString(),
      revokedAt: null as string | null,
      hash,
      source: "created" as "configured" | "created",
      permissions: [...(opts.permissions ?? [])],
      ...(opts.user ? { user: { ...opts.user } } : {}),
    };
    this.keys.set(info.keyId, info);
    return { key, info: strip(info) };
  }
  async listKeys(workspaceId?: string): Promise<ApiKeyInfo[]> {
    return [...this.keys.values()].filter((k) => !workspaceId || k.workspaceId === workspaceId).map(strip);
  }
  async revokeKey(keyId: string): Promise<boolean> {
    const k = this.keys.get(keyId);
    if (!k || k.revokedAt) return false;
    k.revokedAt = new Date().toISOString();
    return true;
  }
  async authenticate(key: string): Promise<Principal | undefined> {
    const hash = hashApiKey(key);
    const k = [...this.keys.values()].find((x) => x.hash === hash && !x.revokedAt);
    if (!k) return undefined;
    return {
      workspaceId: k.workspaceId,
      keyId: k.keyId,
      allowedSkills: this.workspaces.get(k.workspaceId)?.allowedSkills ?? null,
      permissions: k.permissions,
      ...(k.user ? { user: k.user } : {}),
    };
  }
  async countKeys(opts: { includeRevoked?: boolean } = {}): Promise<number> {
    return [...this.keys.values()].filter((k) => opts.includeRevoked || !k.revokedAt).length;
  }
  async syncConfiguredKeys(keys: readonly ConfiguredKey[]): Promise<{ active: number; revoked: number }> {
    const wanted = new Set<string>();
    for (const c of keys) {
      await this.ensureWorkspace(c.workspace, c.skills ? { allowedSkills: c.skills } : {});
      const hash = hashApiKey(c.key);
      wanted.add(hash);
      const existing = [...this.keys.values()].find((k) => k.hash === hash);
      if (!existing) {
        const { info } = await this.createKey(c.workspace, {
          key: c.key,
          label: "configured",
          permissions: c.permissions ?? [],
          ...(c.user ? { user: c.user } : {}),
        });
        this.keys.get(info.keyId)!.source = "configured";
      } else if (existing.source === "configured") {
        existing.workspaceId = c.workspace;
        existing.revokedAt = null;
        existing.permissions = [...(c.permissions ?? [])];
        existing.user = c.user ? { ...c.user } : undefined;
      }
    }
    let revoked = 0;
    for (const k of this.keys.values()) {
      if (k.source === "configured" && !k.revokedAt && !wanted.has(k.hash)) {
        k.revokedAt = new Date().toISOString();
        revoked++;
      }
    }
    return { active: wanted.size, revoked };
  }
}

function strip(k: ApiKeyInfo & { hash?: string; source?: string; permissions?: unknown; user?: KeyUser }): ApiKeyInfo {
  const { hash: _hash, source: _source, permissions: _permissions, user, ...info } = k;
  return { ...info, ...(user ? { userId: user.id } : {}) };
}
