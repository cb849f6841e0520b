/**
 * The count of what waits for me (the Decisions badge and the page title), polled from
 * GET /api/tool-chains/decisions (`mine=true` when signed in as a person), and, when the approver
 * opted in, a browser notification while the tab is hidden and something new arrives.
 */
import type { Api } from "./api.js";
import { h } from "./dom.js";
import type { Me } from "./model/types.js";

/** One small request: often enough that a hidden tab's notification comes within seconds. */
const POLL_MS = 10_000;
const OPT_IN = "toolchain.console.notify";

export interface InboxWatch {
  /** The header's "Notify me" toggle (absent where the browser has no notifications). */
  notifyToggle: HTMLButtonElement | null;
  refresh(): void;
  stop(): void;
}

export function startInboxWatch(api: Api, me: Me | undefined, onCount: (n: number) => void): InboxWatch {
  const mine = me?.actor.kind === "user";
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let known: Set<string> | undefined;
  const supported = typeof Notification !== "undefined";
  let enabled = supported && Notification.permission === "granted" && localStorage.getItem(OPT_IN) === "1";

  const toggle = supported
    ? h("button", { type: "button", class: "btn subtle", "data-testid": "notify-toggle" }, "")
    : null;
  const renderToggle = () => {
    if (!toggle) return;
    toggle.textContent = enabled ? "Notifications on" : "Notify me";
    toggle.setAttribute("aria-pressed", enabled ? "true" : "false");
  };
  toggle?.addEventListener("click", async () => {
    if (enabled) {
      enabled = false;
      localStorage.removeItem(OPT_IN);
    } else {
      const p = Notification.permission === "granted" ? "granted" : await Notification.requestPermission();
      enabled = p === "granted";
      if (enabled) localStorage.setItem(OPT_IN, "1");
    }
    renderToggle();
  });
  renderToggle();

  const schedule = () => {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(() => void poll(), POLL_MS);
  };
  async function poll(): Promise<void> {
    clearTimeout(timer);
    try {
      const items = await api.inbox(mine);
      if (stopped) return;
      onCount(items.length);
      const keys = new Set(items.map((it) => `${it.runId}/${it.stepId}/${it.round}`));
      const fresh = known ? items.filter((it) => !known!.has(`${it.runId}/${it.stepId}/${it.round}`)) : [];
      known = keys;
      if (enabled && document.hidden && fresh.length) {
        const first = fresh[0]!;
        new Notification(
          fresh.length === 1 ? "A decision waits for you" : `${fresh.length} new decisions wait for you`,
          { body: `${first.skillName} · step ${first.stepId} of run ${first.runId}`, tag: "toolchain-decisions" },
        );
      }
    } catch {
      // the badge keeps its last count; the next poll tries again
    }
    schedule();
  }
  const onVisible = () => {
    if (!document.hidden) void poll();
  };
  document.addEventListener("visibilitychange", onVisible);
  void poll();
  return {
    notifyToggle: toggle,
    refresh: () => void poll(),
    stop() {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener("visibilitychange", onVisible);
    },
  };
}
