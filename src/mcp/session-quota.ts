/**
 * Pure: may a key open one more MCP session, and which sessions make room for it? Quotas per key,
 * per workspace and per process (like the event-stream quota in src/api/stream-slots.ts), so one
 * workspace cannot fill the process and lock every other workspace out. Over a quota, the
 * caller's own oldest idle session is closed first: a client that forgets its sessions pays for
 * it, nobody else does. A session is idle when no request is being answered on it (an open GET
 * stream does not count: it would make a session immortal).
 */

export interface SessionQuotas {
  /** Open sessions per API key. @default 100 */
  perKey: number;
  /** Open sessions per workspace (all its keys). @default 1000 */
  perWorkspace: number;
  /** Open sessions per process. @default 10000 */
  total: number;
}

export const DEFAULT_SESSION_QUOTAS: SessionQuotas = { perKey: 100, perWorkspace: 1_000, total: 10_000 };

export interface SessionInfo {
  id: string;
  keyId: string;
  workspaceId: string;
  /** Last request started or finished (ms). */
  lastSeen: number;
  /** Requests being answered, open GET streams not counted. */
  busy: number;
}

export type Admission =
  { ok: true; evict: string[] } | { ok: false; scope: "key" | "workspace" | "process"; limit: number };

/**
 * Room for one more session of `who`: the sessions to close first (the fewest, oldest idle first,
 * the key's own before the workspace's), or the quota that refuses it. The process-wide cap only
 * ever evicts the caller's own sessions: another workspace's sessions are never closed for it.
 */
export function admitSession(
  sessions: Iterable<SessionInfo>,
  who: { keyId: string; workspaceId: string },
  q: SessionQuotas,
): Admission {
  const all = [...sessions];
  const mine = all.filter((s) => s.keyId === who.keyId);
  const workspace = all.filter((s) => s.workspaceId === who.workspaceId);
  const idleOldestFirst = (xs: SessionInfo[]) => xs.filter((s) => s.busy === 0).sort((a, b) => a.lastSeen - b.lastSeen);
  const evict = new Set<string>();
  const take = (pool: SessionInfo[], count: number): boolean => {
    for (const s of idleOldestFirst(pool)) {
      if (count <= 0) break;
      if (evict.has(s.id)) continue;
      evict.add(s.id);
      count--;
    }
    return count <= 0;
  };
  const over = (xs: SessionInfo[], limit: number) => xs.filter((s) => !evict.has(s.id)).length + 1 - limit;
  // the key's quota: its own idle sessions make room
  if (over(mine, q.perKey) > 0 && !take(mine, over(mine, q.perKey)))
    return { ok: false, scope: "key", limit: q.perKey };
  // the workspace's: the key's own first, then the workspace's other keys
  if (
    over(workspace, q.perWorkspace) > 0 &&
    !take(mine, over(workspace, q.perWorkspace)) &&
    !take(workspace, over(workspace, q.perWorkspace))
  ) {
    return { ok: false, scope: "workspace", limit: q.perWorkspace };
  }
  // the process's: only the caller's own idle sessions
  if (over(all, q.total) > 0 && !take(mine, over(all, q.total))) return { ok: false, scope: "process", limit: q.total };
  return { ok: true, evict: [...evict] };
}
