/** What every view gets: the API client and app-wide feedback. */
import type { Api } from "./api.js";

export interface Ctx {
  api: Api;
  /** A short message in the status region (announced to screen readers). */
  notify(message: string, tone?: "ok" | "error"): void;
}

/** A view mounts into `el` and returns its cleanup. */
export type View = (el: HTMLElement, ctx: Ctx) => () => void;
