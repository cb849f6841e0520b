/**
 * Live progress of a run on the CLI's stdout:
 * - "tree" (stdout is a terminal): the step tree redrawn in place as events arrive (and every
 *   250 ms while a step runs, so durations move), cursor hidden meanwhile;
 * - "lines" (piped): one line per event, nothing redrawn, so logs and `grep` read well;
 * - "quiet" (`--json`): nothing; the command prints one JSON document at the end.
 */
import type { RunEvent } from "../kernel/events.js";
import type { RunModel } from "./model.js";
import { esc, terminalLine } from "./escape.js";
import { clip, formatEvent, headerLine, treeLines, type Style } from "./render.js";

export type ProgressMode = "tree" | "lines" | "quiet";

export interface Out {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
  rows?: number;
}

const SHOW_CURSOR = "\x1b[?25h";
const HIDE_CURSOR = "\x1b[?25l";

export class Progress {
  private drawn = 0;
  private scheduled: NodeJS.Timeout | undefined;
  private ticker: NodeJS.Timeout | undefined;
  private model: RunModel | undefined;
  private startedAt = Date.now();
  private readonly restore = () => this.out.write(SHOW_CURSOR);
  /**
   * Ctrl-C while the tree is drawn: Node's default handler would exit with the cursor hidden.
   * The run itself is durable: a run executed here is taken over by the next process (a worker,
   * `npm start`) once its lease expires; one executed by a server goes on.
   */
  private readonly interrupt = () => {
    const id = esc(this.model?.runId ?? "");
    this.out.write(`${SHOW_CURSOR}\ninterrupted: run ${id} goes on durably (npx toolchain show ${id || "<runId>"})\n`);
    process.exit(130);
  };

  constructor(
    private readonly out: Out,
    readonly mode: ProgressMode,
    private readonly style: Style,
    private readonly clock: () => number = Date.now,
  ) {}

  private get width(): number {
    return this.out.columns && this.out.columns > 20 ? this.out.columns : 100;
  }

  /** Start drawing `model` (a new frame below whatever was printed before). */
  begin(model: RunModel, where?: string): void {
    this.model = model;
    this.drawn = 0;
    if (this.mode === "lines") this.out.write(`run ${esc(model.runId)}${where ? ` · ${esc(where)}` : ""}\n`);
    if (this.mode !== "tree") return;
    this.startedAt = model.createdAt ?? this.clock();
    this.out.write(HIDE_CURSOR);
    process.once("exit", this.restore);
    process.once("SIGINT", this.interrupt);
    this.draw();
    this.ticker = setInterval(() => {
      if (this.model?.list().some((s) => s.status === "running")) this.draw();
    }, 250);
  }

  event(e: RunEvent): void {
    this.model?.apply(e);
    if (this.mode === "lines") this.out.write(`${terminalLine(formatEvent(e))}\n`);
    else if (this.mode === "tree") this.schedule();
  }

  /** Stop redrawing; the last frame stays on screen. */
  end(): void {
    if (this.mode !== "tree") return;
    clearTimeout(this.scheduled);
    this.scheduled = undefined;
    clearInterval(this.ticker);
    this.draw();
    this.out.write(SHOW_CURSOR);
    process.removeListener("exit", this.restore);
    process.removeListener("SIGINT", this.interrupt);
  }

  /** Redraws are coalesced: a burst of events is one frame. */
  private schedule(): void {
    this.scheduled ??= setTimeout(() => {
      this.scheduled = undefined;
      this.draw();
    }, 40);
  }

  private frame(): string[] {
    const m = this.model!;
    const now = this.clock();
    const o = { ...this.style, now, width: this.width - 1 };
    let tree = treeLines(m, o);
    // a frame taller than the screen cannot be redrawn in place: keep the unfinished steps in view
    const room = Math.max(3, (this.out.rows ?? 40) - 2);
    if (tree.length > room)
      tree = [...tree.slice(0, room - 1), clip(`  … ${tree.length - room + 1} more steps`, o.width)];
    return [headerLine(m, { ...o, startedAt: this.startedAt }), ...tree.map((l) => clip(`  ${l}`, o.width))];
  }

  private draw(): void {
    if (!this.model) return;
    const lines = this.frame();
    // back to the first line of the previous frame, rewrite each line, clear what is left below
    let s = this.drawn ? `\x1b[${this.drawn}F` : "";
    // each line is one line of text: the cursor moves here and nowhere else
    for (const l of lines) s += `\x1b[2K${terminalLine(l).replace(/\n/g, "\\n")}\n`;
    s += "\x1b[J";
    this.out.write(s);
    this.drawn = lines.length;
  }
}

/** How progress is shown on this stdout. */
export function progressMode(out: Out, json: boolean): ProgressMode {
  if (json) return "quiet";
  // a terminal that cannot move the cursor gets lines too
  return out.isTTY && process.env.TERM !== "dumb" ? "tree" : "lines";
}

/** Colour on a terminal unless NO_COLOR is set (https://no-color.org). */
export function styleFor(out: Out): Style {
  return { color: Boolean(out.isTTY) && !process.env.NO_COLOR && process.env.TERM !== "dumb" };
}
