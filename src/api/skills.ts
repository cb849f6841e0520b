/** GET /api/skills: the skills the caller's workspace may use; GET /api/me: who the caller is. */
import { Router } from "express";
import { rolesAllow } from "../kernel/actor.js";
import type { Runtime } from "../runtime/runtime.js";
import { actorOf, rolesOf, skillMatcher } from "../store/access-store.js";
import { principalOf } from "./auth.js";

export function skillsRouter(runtime: Runtime): Router {
  const r = Router();
  r.get("/api/skills", (_req, res) => {
    res.json({ skills: runtime.registry.manifest(skillMatcher(principalOf(res).allowedSkills)) });
  });
  r.get("/api/me", (_req, res) => {
    const p = principalOf(res);
    const roles = rolesOf(p);
    res.json({
      workspaceId: p.workspaceId,
      actor: actorOf(p),
      roles: roles ? [...roles] : null,
      may: {
        start: rolesAllow(roles, "start"),
        cancel: rolesAllow(roles, "cancel"),
        decide: rolesAllow(roles, "decide"),
        redrive: rolesAllow(roles, "redrive"),
      },
    });
  });
  return r;
}
