/**
 * Single sign-on: a bearer JWT from the team's identity provider, verified with `jose` against
 * the provider's JWKS (signature, issuer, audience, expiry with a small clock skew, allowed
 * algorithms only: `alg: none` and HMAC never), becomes a `user` principal. Claims map to the
 * user id (`sub`), display name, roles and workspace; claim names are configurable. API keys keep
 * working next to it: a bearer that is not a JWT is looked up as a key.
 */
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from "jose";
import { ROLES, USER_ID, type Role } from "../kernel/actor.js";
import { WORKSPACE_ID, type AccessStore, type Principal } from "../store/access-store.js";
import type { Authenticator } from "./auth.js";

export interface OidcConfig {
  issuer: string;
  audience: string;
  jwksUrl: string;
  /** @default ["RS256", "ES256"] */
  algorithms?: string[];
  /** @default 30 */
  clockToleranceS?: number;
  /** Claim names. @default { user: "sub", name: "name", roles: "roles", workspace: "workspace" } */
  claims?: Partial<Record<"user" | "name" | "roles" | "workspace", string>>;
  /** The workspace of a token without the workspace claim. */
  defaultWorkspace?: string;
}

/** From TOOLCHAIN_OIDC_* (undefined unless issuer, audience and JWKS URL are all set). */
export function oidcFromEnv(env: NodeJS.ProcessEnv): OidcConfig | undefined {
  const issuer = env.TOOLCHAIN_OIDC_ISSUER;
  const audience = env.TOOLCHAIN_OIDC_AUDIENCE;
  const jwksUrl = env.TOOLCHAIN_OIDC_JWKS_URL;
  if (!issuer && !audience && !jwksUrl) return undefined;
  if (!issuer || !audience || !jwksUrl)
    throw new TypeError(
      "Expected TOOLCHAIN_OIDC_ISSUER, TOOLCHAIN_OIDC_AUDIENCE and TOOLCHAIN_OIDC_JWKS_URL to be set together",
    );
  const list = (v: string | undefined) =>
    v
      ?.split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  const algorithms = list(env.TOOLCHAIN_OIDC_ALGORITHMS);
  if (algorithms?.some((a) => a === "none" || a.startsWith("HS")))
    throw new TypeError(
      "Expected TOOLCHAIN_OIDC_ALGORITHMS to name asymmetric algorithms (RS256, ES256, …), never none or HS*",
    );
  return {
    issuer,
    audience,
    jwksUrl,
    ...(algorithms ? { algorithms } : {}),
    claims: {
      user: env.TOOLCHAIN_OIDC_USER_CLAIM,
      name: env.TOOLCHAIN_OIDC_NAME_CLAIM,
      roles: env.TOOLCHAIN_OIDC_ROLES_CLAIM,
      workspace: env.TOOLCHAIN_OIDC_WORKSPACE_CLAIM,
    },
    ...(env.TOOLCHAIN_OIDC_DEFAULT_WORKSPACE ? { defaultWorkspace: env.TOOLCHAIN_OIDC_DEFAULT_WORKSPACE } : {}),
  };
}

const looksLikeJwt = (t: string) => /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(t);

/** Keys through `keys`; JWTs through the provider. An invalid token is unknown (401), never a 500. */
export function withOidc(
  keys: Authenticator,
  cfg: OidcConfig,
  access: Pick<AccessStore, "getWorkspace">,
): Authenticator {
  const jwks = createRemoteJWKSet(new URL(cfg.jwksUrl), { cooldownDuration: 30_000, timeoutDuration: 5_000 });
  const c = {
    user: "sub",
    name: "name",
    roles: "roles",
    workspace: "workspace",
    ...Object.fromEntries(Object.entries(cfg.claims ?? {}).filter(([, v]) => v)),
  };
  return {
    async authenticate(token) {
      if (!looksLikeJwt(token)) return keys.authenticate(token);
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, jwks, {
          issuer: cfg.issuer,
          audience: cfg.audience,
          algorithms: cfg.algorithms ?? ["RS256", "ES256"],
          clockTolerance: cfg.clockToleranceS ?? 30,
          requiredClaims: ["exp"],
        }));
      } catch {
        return undefined;
      }
      const id = payload[c.user];
      const ws = payload[c.workspace] ?? cfg.defaultWorkspace;
      if (typeof id !== "string" || !USER_ID.test(id) || typeof ws !== "string" || !WORKSPACE_ID.test(ws))
        return undefined;
      const workspace = await access.getWorkspace(ws);
      if (!workspace) return undefined;
      const name = payload[c.name];
      const claimed = payload[c.roles];
      // a token without roles reads only: the identity provider grants powers explicitly
      const roles = Array.isArray(claimed)
        ? (claimed.filter((r) => ROLES.includes(r as Role)) as Role[])
        : (["viewer"] as Role[]);
      const p: Principal = {
        workspaceId: ws,
        keyId: `jwt:${id}`,
        allowedSkills: workspace.allowedSkills,
        kind: "user",
        user: { id, ...(typeof name === "string" && name.length <= 200 ? { name } : {}), roles },
      };
      return p;
    },
  };
}
