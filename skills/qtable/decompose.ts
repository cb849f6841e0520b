/**
 * Reading a goal: its subject and listed parts, which the templates (templates.ts) word their
 * tasks after. Pure: the same goal always reads the same.
 */
export interface PlannedTask {
  key: string;
  title: string;
  description: string;
  dependsOn: string[];
  /** The phase a task of a phase split into parts belongs to (its parent row in the table). */
  phase?: { key: string; title: string };
}

const LEADING_VERB =
  /^(?:please\s+)?(?:plan|build|create|design|develop|implement|make|set\s+up|setup|write|launch|deliver|ship|introduce|add|prepare|organi[sz]e|roll\s+out|migrate|automate)\s+/i;
const ARTICLE = /^(?:a|an|the|our|my|new|some)\s+/i;
const PART_SPLIT = /\s*(?:,\s*(?:and\s+)?|\s+and\s+|\s*;\s*|\s*\+\s*)\s*/i;

/** The goal's subject and its listed parts: "plan an approval system with e-mail alerts and an audit log". */
export function parseGoal(goal: string): { subject: string; parts: string[] } {
  let text = goal
    .replace(/\s+/g, " ")
    .trim()
    .replace(/[.!?]+$/, "");
  // only the first clause is the deliverable ("…, estimate the effort, build a timeline …" are chain steps)
  const first = text
    .split(/[.;\n]|,\s*(?:then\s+)?(?:estimate|build a timeline|put|insert|add them|create records)\b/i)[0]!
    .trim();
  if (first) text = first;
  text = text.replace(LEADING_VERB, "");
  const withIdx = text.search(/\s+(?:with|including|that has|featuring)\s+/i);
  let subject = withIdx >= 0 ? text.slice(0, withIdx) : text;
  const partsText =
    withIdx >= 0 ? text.slice(withIdx).replace(/^\s+(?:with|including|that has|featuring)\s+/i, "") : "";
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
