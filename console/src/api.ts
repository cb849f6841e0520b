/** The REST API client: every call carries the workspace key; errors keep the API's code. */
import type { InboxItem, Me, PreviewResult, RunEvent, RunSummary, RunView, SkillInfo } from "./model/types.js";
import type { ConfirmRequest } from "../../src/api/schemas.js";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** A decision as the API takes it (POST /api/runs/:id/confirm, src/api/schemas.ts). */
export type ConfirmBody = Omit<ConfirmRequest, "wait">;

export class Api {
  constructor(
    readonly key: string,
    private readonly onUnauthorized: () => void = () => undefined,
  ) {}

  /** Every request says it comes from the console, so decisions and cancels record `via: console`. */
  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.key}`, "x-toolchain-client": "console", ...extra };
  }

  async request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const headers = this.headers(
      body === undefined
        ? { accept: "application/json" }
        : { accept: "application/json", "content-type": "application/json" },
    );
    const res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: "no-store",
    });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!res.ok) {
      const err = (parsed as { error?: { code?: string; message?: string; details?: unknown } } | undefined)?.error;
      if (res.status === 401) this.onUnauthorized();
      throw new ApiError(
        res.status,
        err?.code ?? `HTTP_${res.status}`,
        err?.message ?? (res.statusText || `HTTP ${res.status}`),
        err?.details,
      );
    }
    return parsed as T;
  }

  listRuns(
    q: { status?: readonly string[]; limit?: number; cursor?: string | null },
    signal?: AbortSignal,
  ): Promise<{ runs: RunSummary[]; nextCursor: string | null }> {
    const p = new URLSearchParams();
    if (q.status?.length) p.set("status", q.status.join(","));
    p.set("limit", String(q.limit ?? 25));
    if (q.cursor) p.set("cursor", q.cursor);
    return this.request("GET", `/api/tool-chains/runs?${p}`, undefined, signal);
  }

  getRun(runId: string, signal?: AbortSignal): Promise<RunView> {
    return this.request("GET", `/api/tool-chains/runs/${encodeURIComponent(runId)}`, undefined, signal);
  }

  async events(runId: string, after = 0, signal?: AbortSignal): Promise<RunEvent[]> {
    return (
      await this.request<{ events: RunEvent[] }>(
        "GET",
        `/api/tool-chains/runs/${encodeURIComponent(runId)}/events?after=${after}`,
        undefined,
        signal,
      )
    ).events;
  }

  confirm(runId: string, body: ConfirmBody): Promise<RunView> {
    // wait: false answers at once; the run page follows the run over SSE
    return this.request("POST", `/api/tool-chains/runs/${encodeURIComponent(runId)}/confirm`, { ...body, wait: false });
  }

  cancel(runId: string, reason: string): Promise<RunView> {
    return this.request("POST", `/api/tool-chains/runs/${encodeURIComponent(runId)}/cancel`, { reason, wait: false });
  }

  /** Run a failed run again from where it failed (POST …/redrive); refusals keep their code (RUN_NOT_REDRIVABLE, …). */
  redrive(runId: string): Promise<RunView> {
    return this.request("POST", `/api/tool-chains/runs/${encodeURIComponent(runId)}/redrive`, { wait: false });
  }

  /** What approving with these arguments would do: the skill's own preview, computed by the server. */
  preview(
    runId: string,
    stepId: string,
    body: { arguments: Record<string, unknown>; round?: number },
    signal?: AbortSignal,
  ): Promise<PreviewResult> {
    return this.request(
      "POST",
      `/api/tool-chains/runs/${encodeURIComponent(runId)}/steps/${encodeURIComponent(stepId)}/preview`,
      body,
      signal,
    );
  }

  /** Waiting confirmations of the workspace (mine: only those the caller may decide now), oldest run first. */
  async inbox(mine: boolean, signal?: AbortSignal): Promise<InboxItem[]> {
    return (
      await this.request<{ decisions: InboxItem[] }>(
        "GET",
        `/api/tool-chains/decisions${mine ? "?mine=true" : ""}`,
        undefined,
        signal,
      )
    ).decisions;
  }

  me(): Promise<Me> {
    return this.request("GET", "/api/me");
  }

  private skillsCache: Promise<SkillInfo[]> | undefined;
  skills(): Promise<SkillInfo[]> {
    this.skillsCache ??= this.request<{ skills: SkillInfo[] }>("GET", "/api/skills").then((r) => r.skills);
    this.skillsCache.catch(() => (this.skillsCache = undefined));
    return this.skillsCache;
  }
}
