/**
 * SeaweedFS's security.toml for a SeaweedFS that Berth runs: only Berth's S3 credentials reach its
 * data. The S3 gateway is the one door; every other port refuses a caller without keys that only
 * the gateway and its siblings hold:
 * - gRPC (master, volume, filer, S3, admin, worker: what `weed shell` speaks) is mutual TLS under a
 *   certificate authority made here, so a client without its certificate cannot connect;
 * - the master's, filer's and volume servers' HTTP APIs are HTTPS with client certificates too: the
 *   master's would otherwise delete a bucket's volumes (`/col/delete`) for anyone on the machine;
 * - and the filer's and volume servers' HTTP APIs also need JWTs signed with keys made here.
 * An operator who needs `weed shell` runs it in the directory holding this file.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import forge from 'node-forge';

/** The components whose gRPC servers and clients SeaweedFS configures one by one. */
const GRPC_COMPONENTS = ['master', 'volume', 'filer', 's3', 'admin', 'worker', 'msg_broker', 'msg_agent', 'mq'];

/**
 * Writes `security.toml` and its certificates (in `tls/`) into `directory`, all 0600, with fresh
 * keys each time: SeaweedFS keeps no state that depends on them.
 */
export async function writeSeaweedSecurity(directory: string): Promise<string> {
  const tls = path.join(directory, 'tls');
  await mkdir(tls, { recursive: true, mode: 0o700 });
  const { ca, cert, key } = certificates();
  const files = {
    ca: path.join(tls, 'ca.crt'),
    cert: path.join(tls, 'seaweedfs.crt'),
    key: path.join(tls, 'seaweedfs.key'),
  };
  await Promise.all([
    writeFile(files.ca, ca, { mode: 0o600 }),
    writeFile(files.cert, cert, { mode: 0o600 }),
    writeFile(files.key, key, { mode: 0o600 }),
  ]);
  const jwtKey = () => JSON.stringify(randomBytes(24).toString('base64url'));
  const pair = `cert = ${JSON.stringify(files.cert)}\nkey = ${JSON.stringify(files.key)}\n`;
  const toml = [
    ...['jwt.signing', 'jwt.signing.read', 'jwt.filer_signing', 'jwt.filer_signing.read'].map(
      (table) => `[${table}]\nkey = ${jwtKey()}\n`,
    ),
    ...['master', 'volume', 'filer'].map((server) => `[https.${server}]\n${pair}ca = ${JSON.stringify(files.ca)}\n`),
    `[https.client]\nenabled = true\n${pair}ca = ${JSON.stringify(files.ca)}\n`,
    `[grpc]\nca = ${JSON.stringify(files.ca)}\n`,
    ...GRPC_COMPONENTS.map((component) => `[grpc.${component}]\n${pair}`),
    `[grpc.client]\n${pair}`,
  ].join('\n');
  const file = path.join(directory, 'security.toml');
  await writeFile(file, toml, { mode: 0o600 });
  return file;
}

/** A certificate authority and one certificate it signs, good for both ends of every gRPC call. */
function certificates(): { ca: string; cert: string; key: string } {
  const { pki } = forge;
  const rsa = () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    return {
      privateKey: pki.privateKeyFromPem(privateKey.export({ type: 'pkcs1', format: 'pem' }).toString()),
      publicKey: pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }).toString()),
      pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    };
  };
  const issue = (
    subject: string,
    keys: ReturnType<typeof rsa>,
    signer: { name: string; key: forge.pki.PrivateKey },
    extensions: object[],
  ) => {
    const cert = pki.createCertificate();
    cert.publicKey = keys.publicKey;
    cert.serialNumber = `01${randomBytes(8).toString('hex')}`;
    cert.validity.notBefore = new Date(Date.now() - 60_000);
    cert.validity.notAfter = new Date(Date.now() + 10 * 365 * 86_400_000);
    cert.setSubject([{ name: 'commonName', value: subject }]);
    cert.setIssuer([{ name: 'commonName', value: signer.name }]);
    cert.setExtensions(extensions);
    cert.sign(signer.key as forge.pki.rsa.PrivateKey, forge.md.sha256.create());
    return pki.certificateToPem(cert);
  };
  const caKeys = rsa();
  const caName = 'berth seaweedfs ca';
  const ca = issue(caName, caKeys, { name: caName, key: caKeys.privateKey }, [
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
  ]);
  const leafKeys = rsa();
  // SeaweedFS does not check host names; localhost and loopback are named for other clients' sake.
  const cert = issue('seaweedfs', leafKeys, { name: caName, key: caKeys.privateKey }, [
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true, clientAuth: true },
    {
      name: 'subjectAltName',
      altNames: [
        { type: 2, value: 'localhost' },
        { type: 7, ip: '127.0.0.1' },
      ],
    },
  ]);
  return { ca, cert, key: leafKeys.pem };
}
