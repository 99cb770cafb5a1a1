/** The console's login page: a plain form that posts the cluster token once (no script on it). */

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function loginPage(failure?: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Berth console: log in</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/app.css">
</head>
<body class="login">
<main>
<h1>Berth console</h1>
<form method="post" action="/console/login">
<input type="text" name="user" value="berth" autocomplete="username" hidden>
<label for="token">Cluster token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<p class="hint">The token <code>berth up</code> keeps in <code>.berth/token</code> (the HTTP API's bearer token).</p>
${failure ? `<p id="login-error" role="alert" class="error">${escapeHtml(failure)}</p>` : ''}
<button type="submit">Log in</button>
</form>
</main>
</body>
</html>
`;
}
