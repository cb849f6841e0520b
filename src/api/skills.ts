/** GET /api/skills: the skills the caller's workspace may use. */
import { Router } from "express";
import type { Runtime } from "../runtime/runtime.js";
import { skillMatcher } from "../store/access-store.js";
import { principalOf } from "./auth.js";

export function skillsRouter(runtime: Runtime): Router {
  const r = Router();
  r.get("/api/skills", (_req, res) => {
    res.json({ skills: runtime.registry.manifest(skillMatcher(principalOf(res).allowedSkills)) });
  });
  return r;
}
