/** What every view gets: the API client, who is signed in, and app-wide feedback. */
import type { Api } from "./api.js";
import type { Me } from "./model/types.js";

export interface Ctx {
  api: Api;
  /** The signed-in principal (GET /api/me); undefined if the server could not say. */
  me?: Me;
  /** A short message in the status region (announced to screen readers); it clears by itself. */
  notify(message: string, tone?: "ok" | "error"): void;
  /** Something changed what waits for a decision: refresh the count badge now. */
  pendingChanged(): void;
}

/** A view mounts into `el` and returns its cleanup. */
export type View = (el: HTMLElement, ctx: Ctx) => () => void;
