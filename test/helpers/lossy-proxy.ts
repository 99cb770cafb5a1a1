/**
 * A TCP proxy in front of a service that loses the answers of chosen requests: the request
 * reaches the service whole and is served, and the connection is cut the moment its answer starts
 * back, as a network that fails after the server committed does. Its target can move (a service
 * restarted on another port) or be gone (connections refused), so a client keeps one address.
 */
import net from 'node:net';

export interface LossyProxy {
  url: string;
  /** Where connections go; undefined: each is closed at once. */
  target: string | undefined;
  /** Requests seen, by their first line (`POST /_bulk HTTP/1.1`). */
  readonly requests: string[];
  /** Answers lost so far. */
  readonly lost: number;
  close(): Promise<void>;
}

/**
 * `lose(firstLine, n)`: whether to lose the answer of the n-th request (1-based) whose first line
 * that is; `onLost` is called the moment one is lost (its service has answered, its client never hears).
 */
export async function startLossyProxy(
  target: string,
  lose: (firstLine: string, n: number) => boolean = () => false,
  onLost: () => void = () => {},
): Promise<LossyProxy> {
  const sockets = new Set<net.Socket>();
  const proxy: LossyProxy & { lost: number } = {
    url: '',
    target,
    requests: [],
    lost: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  const server = net.createServer((client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    if (!proxy.target) return void client.destroy();
    const { hostname, port } = new URL(proxy.target);
    const upstream = net.connect(Number(port), hostname);
    sockets.add(upstream);
    upstream.once('close', () => sockets.delete(upstream));
    let losing = false;
    client.on('data', (chunk: Buffer) => {
      const head = chunk.toString('latin1', 0, Math.min(chunk.length, 200));
      // Clients here send one request at a time on a connection: a chunk that starts one is its head.
      if (/^(GET|HEAD|POST|PUT|DELETE) \S+ HTTP\/1\.1\r\n/.test(head)) {
        const firstLine = head.slice(0, head.indexOf('\r\n'));
        proxy.requests.push(firstLine);
        losing = lose(firstLine, proxy.requests.filter((line) => line === firstLine).length);
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!losing) return void client.write(chunk);
      proxy.lost++;
      losing = false;
      client.destroy();
      upstream.destroy();
      onLost();
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return proxy;
}
