/**
 * Three-point estimates without a model or history: from what each task's *verb* says it does
 * (the first words of its title, else its key), never from words elsewhere in the title, so
 * "Roll out the data warehouse migration" is a rollout, not a build. Pure.
 */
export interface ThreePoint {
  key: string;
  optimistic: number;
  likely: number;
  pessimistic: number;
  /** PERT: (optimistic + 4 × likely + pessimistic) / 6, to a tenth of a day. */
  expected: number;
  /** Working days the schedule books: `expected` rounded up to a half day. */
  days: number;
  confidence: number;
}

/** Verb classes: likely days, spread to the pessimistic value, confidence. */
const CLASSES = {
  research: { likely: 2, spread: 1.8, confidence: 0.65 },
  design: { likely: 3, spread: 2, confidence: 0.6 },
  build: { likely: 5, spread: 2.5, confidence: 0.5 },
  verify: { likely: 3, spread: 2, confidence: 0.55 },
  document: { likely: 1.5, spread: 1.6, confidence: 0.7 },
  coordinate: { likely: 2, spread: 2, confidence: 0.6 },
  release: { likely: 1, spread: 2, confidence: 0.65 },
  close: { likely: 1, spread: 1.5, confidence: 0.7 },
} as const;
export type VerbClass = keyof typeof CLASSES;

/** Leading verbs (one or two words) → class. */
const VERBS: [RegExp, VerbClass][] = [
  [
    /^(roll\s*out|go\s+live|cut\s*over|hand\s*over|release|deploy|launch|ship|publish|announce|train|run)\b/i,
    "release",
  ],
  [/^(follow\s+up|close|wrap\s+up|retire|decommission|report|present|retrospect\w*)\b/i, "close"],
  [
    /^(gather|research|interview|analy[sz]e|discover|survey|define|scope|assess|audit|inventory|investigate|collect|study|identify)\b/i,
    "research",
  ],
  [/^(design|architect|model|prototype|wireframe|draft|outline|specify|plan|map)\b/i, "design"],
  [
    /^(build|implement|develop|integrate|code|program|migrate|automate|configure|set\s*up|produce|create|carry\s+out|deliver|make|refactor|port)\b/i,
    "build",
  ],
  [/^(test|qa|verify|validate|review|rehearse|pilot|reconcile|check|screen)\b/i, "verify"],
  [/^(document|write)\b/i, "document"],
  [
    /^(book|arrange|invite|register|schedule|coordinate|source|recruit|hire|onboard|extend|negotiate|order|buy|procure|contract|promote|send)\b/i,
    "coordinate",
  ],
];

const halfDays = (x: number) => Math.max(0.5, Math.round(x * 2) / 2);

/** The class of a task by its title's leading verb, else its key's first segment; undefined: unknown. */
export function verbClass(t: { key: string; title: string }): VerbClass | undefined {
  const title = t.title.trim().replace(/^(please|then|and)\s+/i, "");
  const byTitle = VERBS.find(([re]) => re.test(title))?.[1];
  if (byTitle) return byTitle;
  const head = t.key.split(/[-_.]/)[0]!.replace(/s$/, "");
  return VERBS.find(([re]) => re.test(head))?.[1];
}

/** Combine three points into the estimate the schedule uses. */
export function threePoint(
  key: string,
  optimistic: number,
  likely: number,
  pessimistic: number,
  confidence: number,
): ThreePoint {
  const expected = Math.round(((optimistic + 4 * likely + pessimistic) / 6) * 10) / 10;
  return {
    key,
    optimistic,
    likely,
    pessimistic,
    expected,
    days: Math.max(0.5, Math.ceil(expected * 2 - 1e-9) / 2),
    confidence,
  };
}

/**
 * Likely days from the verb class, scaled by how much the task carries (the length of its
 * description: up to 2×); optimistic 60 % of it, pessimistic by the class's spread. Unknown verbs:
 * 2 days likely with a wide spread and a low confidence.
 */
export function estimateTask(t: { key: string; title: string; description?: string }): ThreePoint {
  const cls = verbClass(t);
  const c = cls ? CLASSES[cls] : { likely: 2, spread: 2.5, confidence: 0.4 };
  const words = `${t.title} ${t.description ?? ""}`.split(/\s+/).filter(Boolean).length;
  const scale = 1 + Math.min(1, Math.max(0, words - 12) / 40);
  const likely = halfDays(c.likely * scale);
  return threePoint(t.key, halfDays(likely * 0.6), likely, halfDays(likely * c.spread), c.confidence);
}
