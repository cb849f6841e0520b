/**
 * Single sign-on against a local JWKS server the test starts (generated keys), over real HTTP and
 * Postgres: a valid token signs a person in as themselves (their decisions are theirs, their roles
 * hold); expired, wrong-audience, wrong-issuer, wrong-key and `alg: none` tokens are refused with
 * 401, and API keys keep working next to tokens.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from "jose";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { cachedAuthenticator } from "../src/api/auth.js";
import { withOidc } from "../src/api/oidc.js";
import { PgAccessStore } from "../src/store/pg-access-store.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { approvalSkill, EffectLedger } from "./helpers/skills.js";

const ISSUER = "https://idp.test.local";
const AUDIENCE = "toolchain";

describe(`JWT sign-in (jose, local JWKS) on ${postgresBackend.name}`, () => {
  let jwksServer: Server;
  let api: ApiUnderTest;
  let close: () => Promise<void>;
  let good: CryptoKey;
  let other: CryptoKey;
  let serviceKey: string;

  beforeAll(async () => {
    const a = await generateKeyPair("RS256");
    const b = await generateKeyPair("RS256");
    good = a.privateKey;
    other = b.privateKey;
    const jwk = { ...(await exportJWK(a.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
    jwksServer = createServer((_req, res) =>
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] })),
    );
    await new Promise<void>((r) => jwksServer.listen(0, "127.0.0.1", () => r()));
    const jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks.json`;
    const o = await postgresBackend.open({ skills: [approvalSkill(new EffectLedger())] });
    const access = new PgAccessStore(o.db!);
    await access.ensureWorkspace("sso");
    serviceKey = (await access.createKey("sso")).key;
    api = await serveApi(o.runtime, o.db, {
      access,
      auth: withOidc(cachedAuthenticator(access, 0), { issuer: ISSUER, audience: AUDIENCE, jwksUrl }, access),
    });
    close = async () => {
      await api.close();
      await o.close();
      await new Promise((r) => jwksServer.close(r));
    };
  });
  afterAll(() => close?.());

  const token = (
    claims: Record<string, unknown>,
    o: { key?: CryptoKey; aud?: string; iss?: string; exp?: string | number } = {},
  ) =>
    new SignJWT({ workspace: "sso", ...claims })
      .setProtectedHeader({ alg: "RS256", kid: "k1" })
      .setIssuer(o.iss ?? ISSUER)
      .setAudience(o.aud ?? AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(o.exp ?? "5m")
      .sign(o.key ?? good);

  test("a valid token is the person: their run, their decision, their roles", async () => {
    const ada = await token({ sub: "ada", name: "Ada", roles: ["operator"] });
    const grace = await token({ sub: "grace", roles: ["approver"] });
    const started = await call(api.url, "POST", "/api/tool-chains/run", {
      key: ada,
      body: { plan: { steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "sso" } }] } },
    });
    expect(started.status).toBe(200);
    expect(started.body.requestedBy).toEqual({ kind: "user", id: "ada", name: "Ada", via: "rest" });
    const runId = started.body.runId as string;
    const refused = await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
      key: ada,
      body: { stepId: "pub", decision: "approve" },
    });
    expect([refused.status, refused.body.error.code]).toEqual([403, "ROLE_NOT_ALLOWED"]);
    const ok = await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
      key: grace,
      body: { stepId: "pub", decision: "approve" },
    });
    expect(ok.body).toMatchObject({
      status: "completed",
      steps: [{ decision: { by: { kind: "user", id: "grace" }, via: "rest" } }],
    });
    // no roles claim: read only
    const reader = await token({ sub: "rita" });
    expect((await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key: reader })).status).toBe(200);
    expect(
      (
        await call(api.url, "POST", "/api/tool-chains/run", {
          key: reader,
          body: { plan: { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 } }] } },
        })
      ).body.error.code,
    ).toBe("ROLE_NOT_ALLOWED");
    // API keys keep working
    expect((await call(api.url, "GET", "/api/skills", { key: serviceKey })).status).toBe(200);
  });

  test("expired, wrong audience, wrong issuer, wrong key, alg none, unknown workspace: 401", async () => {
    const none = (() => {
      const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
      return `${b64({ alg: "none", typ: "JWT" })}.${b64({ sub: "mallory", workspace: "sso", roles: ["admin"], iss: ISSUER, aud: AUDIENCE, exp: Math.floor(Date.now() / 1000) + 300 })}.`;
    })();
    const bad = {
      expired: await token({ sub: "ada", roles: ["admin"] }, { exp: Math.floor(Date.now() / 1000) - 120 }),
      audience: await token({ sub: "ada", roles: ["admin"] }, { aud: "someone-else" }),
      issuer: await token({ sub: "ada", roles: ["admin"] }, { iss: "https://evil.example" }),
      key: await token({ sub: "ada", roles: ["admin"] }, { key: other }),
      none,
      workspace: await token({ sub: "ada", roles: ["admin"], workspace: "nowhere" }),
    };
    for (const [why, t] of Object.entries(bad)) {
      const r = await call(api.url, "GET", "/api/tool-chains/runs", { key: t });
      expect([why, r.status, r.body.error.code]).toEqual([why, 401, "UNAUTHORIZED"]);
    }
  });
});
