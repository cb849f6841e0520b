/**
 * Deterministic task decomposition and effort heuristics: what `qtable.task.split` and
 * `qtable.task.estimate` do when no model is configured. Pure functions of their input, so the
 * same goal always gives the same plan, and the tasks still read like the goal: the goal's subject
 * and its listed parts become the task titles.
 */
export interface PlannedTask {
  key: string;
  title: string;
  description: string;
  dependsOn: string[];
}
export interface TaskEstimate {
  key: string;
  days: number;
  confidence: number;
}

const LEADING_VERB = /^(?:please\s+)?(?:plan|build|create|design|develop|implement|make|set\s+up|setup|write|launch|deliver|ship|introduce|add|prepare|organi[sz]e|roll\s+out|migrate|automate)\s+/i;
const ARTICLE = /^(?:a|an|the|our|my|new|some)\s+/i;
const PART_SPLIT = /\s*(?:,\s*(?:and\s+)?|\s+and\s+|\s*;\s*|\s*\+\s*)\s*/i;

/** The goal's subject and its listed parts: "plan an approval system with e-mail alerts and an audit log". */
export function parseGoal(goal: string): { subject: string; parts: string[] } {
  let text = goal.replace(/\s+/g, " ").trim().replace(/[.!?]+$/, "");
  // only the first clause is the deliverable ("…, estimate the effort, build a timeline …" are chain steps)
  const first = text.split(/[.;\n]|,\s*(?:then\s+)?(?:estimate|build a timeline|put|insert|add them|create records)\b/i)[0]!.trim();
  if (first) text = first;
  text = text.replace(LEADING_VERB, "");
  const withIdx = text.search(/\s+(?:with|including|that has|featuring)\s+/i);
  let subject = withIdx >= 0 ? text.slice(0, withIdx) : text;
  const partsText = withIdx >= 0 ? text.slice(withIdx).replace(/^\s+(?:with|including|that has|featuring)\s+/i, "") : "";
  subject = stripArticles(subject) || "the project";
  const parts = partsText
    .split(PART_SPLIT)
    .map((p) => stripArticles(p.trim()))
    .filter((p) => p.length > 0)
    .slice(0, 8);
  return { subject, parts: [...new Set(parts)] };
}

function stripArticles(s: string): string {
  let out = s.trim();
  for (let i = 0; i < 3 && ARTICLE.test(out); i++) out = out.replace(ARTICLE, "");
  return out.trim();
}

export function slug(s: string): string {
  const k = s
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40)
    .replace(/-+$/, "");
  return k || "part";
}

/**
 * requirements → design → build (one task per listed part) → test → docs → rollout.
 * `context` (e.g. the team, constraints) is carried into the descriptions.
 */
export function decomposeGoal(goal: string, context?: unknown): PlannedTask[] {
  const { subject, parts } = parseGoal(goal);
  const note = contextNote(context);
  const the = `the ${subject}`;
  const tasks: PlannedTask[] = [
    { key: "requirements", title: `Gather requirements for ${the}`, description: `Interview stakeholders and write down what ${the} must do, for whom and under which constraints.${note}`, dependsOn: [] },
    { key: "design", title: `Design ${the}`, description: `Data model, flows and interfaces of ${the}${parts.length ? `, covering ${parts.join(", ")}` : ""}.`, dependsOn: ["requirements"] },
  ];
  const buildKeys: string[] = [];
  if (parts.length) {
    const used = new Set(tasks.map((t) => t.key));
    for (const p of parts) {
      let key = `build-${slug(p)}`;
      for (let n = 2; used.has(key); n++) key = `build-${slug(p)}-${n}`;
      used.add(key);
      buildKeys.push(key);
      tasks.push({ key, title: `Build ${p} for ${the}`, description: `Implement ${p} as designed for ${the}.`, dependsOn: ["design"] });
    }
  } else {
    buildKeys.push("build");
    tasks.push({ key: "build", title: `Build ${the}`, description: `Implement ${the} as designed.`, dependsOn: ["design"] });
  }
  tasks.push(
    { key: "test", title: `Test ${the}`, description: `Verify ${the} end to end against the requirements.`, dependsOn: [...buildKeys] },
    { key: "docs", title: `Document ${the}`, description: `User and operator documentation for ${the}.`, dependsOn: ["design"] },
    { key: "rollout", title: `Roll out ${the}`, description: `Release ${the}, train its users and hand it over.`, dependsOn: ["test", "docs"] },
  );
  return tasks;
}

function contextNote(context: unknown): string {
  if (context === undefined || context === null) return "";
  const text = typeof context === "string" ? context : JSON.stringify(context);
  if (!text || text === "{}") return "";
  return ` Context: ${text.length > 300 ? `${text.slice(0, 300)}…` : text}`;
}

/** Base effort by what the task's title says it does (first match wins). */
const KINDS: { re: RegExp; days: number; confidence: number }[] = [
  { re: /\b(requirement|research|interview|analy[sz]e|discover|gather|survey)/i, days: 2, confidence: 0.7 },
  { re: /\b(design|architect|model|prototype|wireframe|spec)/i, days: 3, confidence: 0.65 },
  { re: /\b(build|implement|develop|integrat|code|program|migrat|automat|configure)/i, days: 5, confidence: 0.55 },
  { re: /\b(test|qa|verify|validat|review)/i, days: 3, confidence: 0.6 },
  { re: /\b(document|docs|write|guide|manual)/i, days: 1.5, confidence: 0.75 },
  { re: /\b(roll\s*out|release|deploy|launch|train|hand\s*over|ship)/i, days: 1, confidence: 0.7 },
];

/**
 * Effort in days (> 0) from the task's kind, scaled by how much it carries (parts named in the
 * title and the length of its description), with a confidence that drops for unknown kinds.
 */
export function estimateTask(t: { key: string; title: string; description?: string }): TaskEstimate {
  const kind = KINDS.find((k) => k.re.test(t.title)) ?? KINDS.find((k) => k.re.test(t.key));
  const base = kind?.days ?? 2;
  const words = `${t.title} ${t.description ?? ""}`.split(/\s+/).filter(Boolean).length;
  const scale = 1 + Math.min(1, Math.max(0, words - 12) / 40); // long descriptions: up to 2×
  const days = Math.round(base * scale * 2) / 2; // half days
  return { key: t.key, days: Math.max(0.5, days), confidence: kind ? kind.confidence : 0.4 };
}
