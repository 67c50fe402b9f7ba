/**
 * Where containerd listens for gRPC by default (its own default `--address`). A file of its own so
 * the agent's settings (and the help the CLI prints) can name it without loading the gRPC client.
 */
export const DEFAULT_CONTAINERD_SOCKET = '/run/containerd/containerd.sock';
