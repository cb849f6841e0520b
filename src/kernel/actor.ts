/**
 * Who did something, as the run history records it: the principal behind a request (a person's
 * personal key or sign-in, a service key, an agent surface acting for one) and the surface it came
 * through. Pure data, shared by the API, the runtime, the graph and the stores.
 */
import { z } from "zod";

/** `user`: a person (personal key, JWT); `service`: a key without a user; `agent`: a model-facing surface acting on its own. */
export type ActorKind = "user" | "service" | "agent";
export const ACTOR_KINDS: readonly ActorKind[] = ["user", "service", "agent"];

/** The surface a request, decision or cancel came through (`library`: in-process API callers; `system`: the runtime itself, e.g. an approval expiring). */
export type Via = "rest" | "console" | "cli" | "mcp" | "agent" | "studio" | "library" | "system";
export const VIAS: readonly Via[] = ["rest", "console", "cli", "mcp", "agent", "studio", "library", "system"];

export interface Actor {
  kind: ActorKind;
  /** A user's id (the key's `user.id`, a JWT's subject); a service key's key id. */
  id: string;
  name?: string;
}

/** Who and through which surface: what a decision, a cancel and a run's start record. */
export interface Acting {
  by: Actor;
  via: Via;
}

/** Who decides: the acting principal and its workspace roles (approval policies match them). */
export interface Decider extends Acting {
  /** undefined: a principal without roles. */
  roles?: readonly Role[];
}

/** Roles per workspace. A principal without roles has every power (keys from before roles existed, the dev key). */
export type Role = "admin" | "operator" | "approver" | "viewer";
export const ROLES: readonly Role[] = ["admin", "operator", "approver", "viewer"];

/** What a request wants to do; each role grants some. */
export type Action = "read" | "start" | "cancel" | "decide" | "redrive" | "manage_keys";

const GRANTS: Record<Role, readonly Action[]> = {
  admin: ["read", "start", "cancel", "decide", "redrive", "manage_keys"],
  operator: ["read", "start", "cancel", "redrive"],
  approver: ["read", "decide"],
  viewer: ["read"],
};

/** undefined roles: every action (today's keys keep their powers). */
export function rolesAllow(roles: readonly Role[] | undefined, action: Action): boolean {
  if (roles === undefined) return true;
  return roles.some((r) => GRANTS[r]?.includes(action));
}

/** Who acted when nobody said (in-process library calls). */
export const LIBRARY_ACTING: Acting = { by: { kind: "service", id: "library" }, via: "library" };

/** Who rejects a confirmation whose approval policy expired (onExpiry: "reject"): the runtime, recorded as such. */
export const EXPIRY_ACTING: Acting = {
  by: { kind: "service", id: "toolchain:expiry", name: "approval expiry" },
  via: "system",
};

export const USER_ID = /^[A-Za-z0-9][A-Za-z0-9_.@:+-]{0,127}$/;

export const ActorSchema = z
  .object({
    kind: z.enum(ACTOR_KINDS as [ActorKind, ...ActorKind[]]),
    id: z.string().min(1).max(200),
    name: z.string().max(200).optional(),
  })
  .strict()
  .describe("Who: a user (id, display name), a service key (its key id) or an agent surface");
export const ViaSchema = z.enum(VIAS as [Via, ...Via[]]).describe("The surface it came through");
/** One approval of a quorum, as a decision carries it. */
export const ApprovalGivenSchema = z
  .object({
    by: ActorSchema,
    via: ViaSchema.optional(),
    at: z.string().optional(),
    comment: z.string().max(4_000).optional(),
  })
  .strict();
