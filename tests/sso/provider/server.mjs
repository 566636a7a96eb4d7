// The OpenID provider Croniq's single sign-on tests sign in through
// (tests/e2e/test_sso_browser.py, started by harness/oidc_provider.py):
// oidc-provider, the reference Node implementation, with one client, PKCE
// required, a `groups` claim and its development login and consent pages.
//
// Environment: PORT, ISSUER, CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, and
// ACCOUNTS_FILE: {"alice": {"email": ..., "groups": [...]}}, read at each
// request for claims, so a test changes a user's groups between two logins.
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    console.error(`${name} is required`);
    process.exit(2);
  }
  return value;
};

const accounts = () => JSON.parse(readFileSync(env('ACCOUNTS_FILE'), 'utf8'));

const provider = new Provider(env('ISSUER'), {
  clients: [
    {
      client_id: env('CLIENT_ID'),
      client_secret: env('CLIENT_SECRET'),
      redirect_uris: [env('REDIRECT_URI')],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
  ],
  // Every authorization request must carry a code challenge (S256).
  pkce: { required: () => true },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name', 'groups'],
  },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        const account = accounts()[id] ?? {};
        return {
          sub: id,
          preferred_username: id,
          name: id,
          email: account.email,
          email_verified: true,
          groups: account.groups ?? [],
        };
      },
    };
  },
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ['croniq-test-provider-cookie-key'] },
});

provider.on('server_error', (ctx, error) => console.error('server_error', error));

provider.listen(Number(env('PORT')), '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${env('ISSUER')}`);
});
