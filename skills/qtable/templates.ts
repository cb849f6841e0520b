/**
 * The deterministic split: what `qtable.task.split` answers without a model (or when the model's
 * answers do not hold together). A template per kind of goal, chosen by the goal's words, worded
 * after the goal's subject and its listed parts. Pure: the same goal always gives the same tasks.
 * Every title starts with the verb the estimator reads (estimate-heuristics.ts).
 */
import { parseGoal, slug, type PlannedTask } from "./decompose.js";

export const GOAL_KINDS = ["software", "event", "campaign", "migration", "hiring", "research", "project"] as const;
export type GoalKind = (typeof GOAL_KINDS)[number];

/** First match wins: a "migration of the billing system" is a migration, not software; an "audit log" is software, not research. */
const KIND_WORDS: [GoalKind, RegExp][] = [
  [
    "migration",
    /\b(migrat\w*|move (?:\w+ ){0,3}to|moving (?:\w+ ){0,3}to|switch (?:\w+ ){0,3}to|upgrad\w*|transition|replatform\w*|cut-?over|consolidat\w*)\b/i,
  ],
  [
    "hiring",
    /\b(hir(?:e|es|ing)|recruit\w*|staff(?:ing)? up|new (?:engineer|designer|manager|developer|employee)s?|job opening|headcount|onboard(?:ing)? (?:a |the )?new)\b/i,
  ],
  [
    "event",
    /\b(event|conference|meetup|meet-up|workshop|summit|offsite|off-site|party|wedding|webinar|hackathon|gala|festival|trade ?show|retreat|ceremony)\b/i,
  ],
  [
    "campaign",
    /\b(campaign|marketing|promotion|advert\w*|newsletter|go-to-market|gtm|social media|brand awareness|product launch)\b/i,
  ],
  [
    "software",
    /\b(app|application|system|platform|portal|api|service|website|site|tool|dashboard|feature|integration|software|backend|frontend|database|pipeline|bot|sdk|plugin|module|automation)\b/i,
  ],
  ["research", /\b(research|study|survey|evaluat\w*|assess\w*|investigat\w*|feasibility|benchmark\w*|audit)\b/i],
];

export function goalKind(goal: string): GoalKind {
  return KIND_WORDS.find(([, re]) => re.test(goal))?.[0] ?? "project";
}

interface Phase {
  key: string;
  title: (the: string) => string;
  description: (the: string, parts: string[]) => string;
  dependsOn: string[];
  /** One task per listed part instead of one for the phase (dependents wait for all of them). */
  perPart?: { title: (part: string, the: string) => string; description: (part: string, the: string) => string };
}

const covering = (parts: string[]) => (parts.length ? `, covering ${parts.join(", ")}` : "");

const TEMPLATES: Record<GoalKind, Phase[]> = {
  software: [
    {
      key: "requirements",
      title: (t) => `Gather requirements for ${t}`,
      description: (t) =>
        `Interview stakeholders and write down what ${t} must do, for whom and under which constraints.`,
      dependsOn: [],
    },
    {
      key: "design",
      title: (t) => `Design ${t}`,
      description: (t, p) => `Data model, flows and interfaces of ${t}${covering(p)}.`,
      dependsOn: ["requirements"],
    },
    {
      key: "build",
      title: (t) => `Build ${t}`,
      description: (t) => `Implement ${t} as designed.`,
      dependsOn: ["design"],
      perPart: {
        title: (p, t) => `Build ${p} for ${t}`,
        description: (p, t) => `Implement ${p} as designed for ${t}.`,
      },
    },
    {
      key: "test",
      title: (t) => `Test ${t}`,
      description: (t) => `Verify ${t} end to end against the requirements.`,
      dependsOn: ["build"],
    },
    {
      key: "docs",
      title: (t) => `Document ${t}`,
      description: (t) => `User and operator documentation for ${t}.`,
      dependsOn: ["design"],
    },
    {
      key: "rollout",
      title: (t) => `Roll out ${t}`,
      description: (t) => `Release ${t}, train its users and hand it over.`,
      dependsOn: ["test", "docs"],
    },
  ],
  event: [
    {
      key: "goals",
      title: (t) => `Define goals, audience and budget for ${t}`,
      description: (t) => `Who ${t} is for, what it should achieve, the date range and the budget.`,
      dependsOn: [],
    },
    {
      key: "venue",
      title: (t) => `Book the venue and date for ${t}`,
      description: (t) => `Shortlist, visit and contract a venue for ${t}.`,
      dependsOn: ["goals"],
    },
    {
      key: "program",
      title: (t) => `Draft the program of ${t}`,
      description: (t, p) => `Agenda, speakers or performers of ${t}${covering(p)}.`,
      dependsOn: ["goals"],
    },
    {
      key: "arrange",
      title: (t) => `Arrange catering, equipment and logistics for ${t}`,
      description: (t) => `Catering, AV, travel and accommodation for ${t}.`,
      dependsOn: ["venue"],
      perPart: {
        title: (p, t) => `Arrange ${p} for ${t}`,
        description: (p, t) => `Source, book and confirm ${p} for ${t}.`,
      },
    },
    {
      key: "invite",
      title: (t) => `Invite and register attendees for ${t}`,
      description: (t) => `Invitations, registration and reminders for ${t}.`,
      dependsOn: ["venue", "program"],
    },
    {
      key: "rehearse",
      title: (t) => `Rehearse ${t}`,
      description: (t) => `Walk through the run of show of ${t} with everyone involved.`,
      dependsOn: ["arrange", "invite"],
    },
    {
      key: "run",
      title: (t) => `Run ${t}`,
      description: (t) => `The day(s) of ${t}: on-site coordination.`,
      dependsOn: ["rehearse"],
    },
    {
      key: "follow-up",
      title: (t) => `Follow up on ${t}`,
      description: (t) => `Thank attendees, collect feedback and settle the bills of ${t}.`,
      dependsOn: ["run"],
    },
  ],
  campaign: [
    {
      key: "brief",
      title: (t) => `Define the brief for ${t}`,
      description: (t) => `Audience, message, goals and budget of ${t}.`,
      dependsOn: [],
    },
    {
      key: "plan",
      title: (t) => `Plan the channels and calendar of ${t}`,
      description: (t, p) => `Which channels, when, and how ${t} is measured${covering(p)}.`,
      dependsOn: ["brief"],
    },
    {
      key: "produce",
      title: (t) => `Produce the content for ${t}`,
      description: (t) => `Copy, visuals and landing pages for ${t}.`,
      dependsOn: ["plan"],
      perPart: {
        title: (p, t) => `Produce ${p} for ${t}`,
        description: (p, t) => `Write, design and approve ${p} for ${t}.`,
      },
    },
    {
      key: "review",
      title: (t) => `Review ${t} with legal and brand`,
      description: (t) => `Approvals of every asset of ${t}.`,
      dependsOn: ["produce"],
    },
    {
      key: "launch",
      title: (t) => `Launch ${t}`,
      description: (t) => `Publish and start ${t} on every planned channel.`,
      dependsOn: ["review"],
    },
    {
      key: "report",
      title: (t) => `Report on ${t}`,
      description: (t) => `Measure ${t} against its goals and write up what to keep.`,
      dependsOn: ["launch"],
    },
  ],
  migration: [
    {
      key: "inventory",
      title: (t) => `Inventory what ${t} moves`,
      description: (t) => `Data, jobs, users and integrations touched by ${t}.`,
      dependsOn: [],
    },
    {
      key: "design",
      title: (t) => `Design the target and the cutover of ${t}`,
      description: (t, p) => `Target layout, mapping and a rollback plan for ${t}${covering(p)}.`,
      dependsOn: ["inventory"],
    },
    {
      key: "migrate",
      title: (t) => `Migrate the data for ${t}`,
      description: (t) => `Build and run the migration of ${t} in a staging copy.`,
      dependsOn: ["design"],
      perPart: {
        title: (p, t) => `Migrate ${p} for ${t}`,
        description: (p, t) => `Move ${p} as designed for ${t}, in a staging copy first.`,
      },
    },
    {
      key: "validate",
      title: (t) => `Validate ${t}`,
      description: (t) => `Reconcile counts and checksums, run the old and new side by side for ${t}.`,
      dependsOn: ["migrate"],
    },
    {
      key: "docs",
      title: (t) => `Document ${t}`,
      description: (t) => `Runbook and what changes for the users of ${t}.`,
      dependsOn: ["design"],
    },
    {
      key: "cutover",
      title: (t) => `Cut over ${t}`,
      description: (t) => `Switch production to the target of ${t}, with the rollback plan at hand.`,
      dependsOn: ["validate", "docs"],
    },
    {
      key: "decommission",
      title: (t) => `Decommission the old side of ${t}`,
      description: (t) => `Retire what ${t} replaced once the new side is stable.`,
      dependsOn: ["cutover"],
    },
  ],
  hiring: [
    {
      key: "role",
      title: (t) => `Define the role for ${t}`,
      description: (t) => `Responsibilities, level, budget and interview loop for ${t}.`,
      dependsOn: [],
    },
    {
      key: "posting",
      title: (t) => `Publish the job posting for ${t}`,
      description: (t) => `Write and publish the posting for ${t}; brief recruiters.`,
      dependsOn: ["role"],
    },
    {
      key: "source",
      title: (t) => `Source candidates for ${t}`,
      description: (t) => `Referrals, outreach and inbound applications for ${t}.`,
      dependsOn: ["posting"],
    },
    {
      key: "screen",
      title: (t) => `Screen candidates for ${t}`,
      description: (t) => `First calls and take-home or portfolio reviews for ${t}.`,
      dependsOn: ["source"],
    },
    {
      key: "interview",
      title: (t) => `Interview finalists for ${t}`,
      description: (t, p) => `The interview loop for ${t}${covering(p)}.`,
      dependsOn: ["screen"],
    },
    {
      key: "offer",
      title: (t) => `Extend the offer for ${t}`,
      description: (t) => `References, offer and negotiation for ${t}.`,
      dependsOn: ["interview"],
    },
    {
      key: "onboard",
      title: (t) => `Onboard the new hire for ${t}`,
      description: (t) => `Equipment, accounts, a buddy and a first-month plan for ${t}.`,
      dependsOn: ["offer"],
    },
  ],
  research: [
    {
      key: "questions",
      title: (t) => `Define the questions of ${t}`,
      description: (t) => `What ${t} must answer and how the answer will be used.`,
      dependsOn: [],
    },
    {
      key: "method",
      title: (t) => `Design the method of ${t}`,
      description: (t, p) => `Sources, sample and criteria for ${t}${covering(p)}.`,
      dependsOn: ["questions"],
    },
    {
      key: "collect",
      title: (t) => `Collect the data for ${t}`,
      description: (t) => `Interviews, measurements or desk research for ${t}.`,
      dependsOn: ["method"],
      perPart: {
        title: (p, t) => `Research ${p} for ${t}`,
        description: (p, t) => `Collect what ${t} needs about ${p}.`,
      },
    },
    {
      key: "analyse",
      title: (t) => `Analyse the findings of ${t}`,
      description: (t) => `What the data of ${t} says, and how sure we are.`,
      dependsOn: ["collect"],
    },
    {
      key: "report",
      title: (t) => `Write the report on ${t}`,
      description: (t) => `Findings and recommendations of ${t}.`,
      dependsOn: ["analyse"],
    },
    {
      key: "present",
      title: (t) => `Present ${t}`,
      description: (t) => `Walk the decision makers through ${t}.`,
      dependsOn: ["report"],
    },
  ],
  project: [
    {
      key: "scope",
      title: (t) => `Define the scope of ${t}`,
      description: (t) => `Goals, stakeholders, constraints and what done means for ${t}.`,
      dependsOn: [],
    },
    {
      key: "plan",
      title: (t) => `Plan ${t}`,
      description: (t, p) => `Work breakdown, owners and budget for ${t}${covering(p)}.`,
      dependsOn: ["scope"],
    },
    {
      key: "execute",
      title: (t) => `Carry out ${t}`,
      description: (t) => `Do the work of ${t} as planned.`,
      dependsOn: ["plan"],
      perPart: { title: (p, t) => `Deliver ${p} for ${t}`, description: (p, t) => `Do the work on ${p} for ${t}.` },
    },
    {
      key: "review",
      title: (t) => `Review ${t}`,
      description: (t) => `Check the results of ${t} against the goals with the stakeholders.`,
      dependsOn: ["execute"],
    },
    {
      key: "close",
      title: (t) => `Close ${t}`,
      description: (t) => `Hand over, archive and note the lessons of ${t}.`,
      dependsOn: ["review"],
    },
  ],
};

/** The template for the goal's kind, worded after the goal; `context` is noted in the first task. */
export function templateTasks(goal: string, context?: unknown): { kind: GoalKind; tasks: PlannedTask[] } {
  const kind = goalKind(goal);
  const { subject, parts } = parseGoal(goal);
  const the = `the ${subject}`;
  const phases = TEMPLATES[kind];
  const expanded = new Map<string, string[]>();
  const tasks: PlannedTask[] = [];
  const used = new Set(phases.map((p) => p.key));
  for (const ph of phases) {
    const dependsOn = ph.dependsOn.flatMap((d) => expanded.get(d) ?? [d]);
    if (ph.perPart && parts.length) {
      const keys: string[] = [];
      for (const part of parts) {
        let key = `${ph.key}-${slug(part)}`;
        for (let n = 2; used.has(key); n++) key = `${ph.key}-${slug(part)}-${n}`;
        used.add(key);
        keys.push(key);
        tasks.push({
          key,
          title: ph.perPart.title(part, the),
          description: ph.perPart.description(part, the),
          dependsOn,
          // the parts are the phase's tasks: the phase itself becomes their parent row
          phase: { key: ph.key, title: ph.title(the) },
        });
      }
      expanded.set(ph.key, keys);
    } else {
      tasks.push({ key: ph.key, title: ph.title(the), description: ph.description(the, parts), dependsOn });
    }
  }
  const note = contextNote(context);
  if (note) tasks[0] = { ...tasks[0]!, description: `${tasks[0]!.description}${note}` };
  return { kind, tasks };
}

function contextNote(context: unknown): string {
  if (context === undefined || context === null) return "";
  const text = typeof context === "string" ? context : JSON.stringify(context);
  if (!text || text === "{}") return "";
  return ` Context: ${text.length > 300 ? `${text.slice(0, 300)}…` : text}`;
}

/** The template's tasks for a goal (the kind chosen by its words). */
export function decomposeGoal(goal: string, context?: unknown): PlannedTask[] {
  return templateTasks(goal, context).tasks;
}
