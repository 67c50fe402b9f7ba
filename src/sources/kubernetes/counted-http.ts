/**
 * The Kubernetes sources' requests through @kubernetes/client-node, made to account for themselves:
 * each one counted (store/kubernetes/api-requests.ts, the same counter the cluster store's client
 * tells) and sent with the agent's User-Agent, so an API server's audit log names the node.
 *
 * Guarantees: `countedHttpLibrary` counts every request it sends once, with its status or as
 * unreachable (a request the caller aborted is not counted: it ends with the agent or its loop);
 * `coreApiOf` is the library's CoreV1Api on that HTTP layer, with the kubeconfig's credentials as
 * `makeApiClient` gives them; `identifiedConfig` is the kubeconfig for the library's Watch, which
 * takes no HTTP layer: the User-Agent is set where it applies the credentials (the watch is counted
 * by collection-requests.ts, which sees how it opened).
 */
import {
  CoreV1Api,
  type HttpLibrary,
  IsomorphicFetchHttpLibrary,
  type KubeConfig,
  type RequestContext,
  ServerConfiguration,
  createConfiguration,
  wrapHttpLibrary,
} from '@kubernetes/client-node';
import { type ApiRequestCounter, asksWatch } from '../../store/kubernetes/api-requests.ts';

/** What the sources' requests report to and say of themselves; either may be absent (tests). */
export interface RequestAccounting {
  readonly requests?: ApiRequestCounter | undefined;
  /** `warren/<version> (node <name>)`. */
  readonly userAgent?: string | undefined;
}

/** The library's fetch layer, each request identified and counted. */
export function countedHttpLibrary(accounting: RequestAccounting): HttpLibrary {
  const fetchLayer = new IsomorphicFetchHttpLibrary();
  return wrapHttpLibrary({
    async send(context: RequestContext) {
      if (accounting.userAgent !== undefined) context.setHeaderParam('User-Agent', accounting.userAgent);
      const url = new URL(context.getUrl());
      const count = (status: number | undefined): void =>
        accounting.requests?.countRequest(
          context.getHttpMethod(),
          url.pathname,
          asksWatch(url.searchParams.get('watch')),
          status,
        );
      try {
        const response = await fetchLayer.send(context).toPromise();
        count(response.httpStatusCode);
        return response;
      } catch (error) {
        if (context.getSignal()?.aborted !== true) count(undefined);
        throw error;
      }
    },
  });
}

/** The core API (pods, namespaces, nodes, events) of the kubeconfig's current cluster, counted. */
export function coreApiOf(kubeConfig: KubeConfig, accounting: RequestAccounting): CoreV1Api {
  const cluster = kubeConfig.getCurrentCluster();
  if (cluster === null) throw new Error('the kubeconfig names no current cluster');
  return new CoreV1Api(
    createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: kubeConfig },
      httpApi: countedHttpLibrary(accounting),
    }),
  );
}

/** The kubeconfig as the library's Watch should use it: its credentials, and the User-Agent. */
export function identifiedConfig(kubeConfig: KubeConfig, userAgent: string | undefined): KubeConfig {
  if (userAgent === undefined) return kubeConfig;
  const identified: KubeConfig = Object.create(kubeConfig);
  identified.applySecurityAuthentication = async (context: RequestContext): Promise<void> => {
    await kubeConfig.applySecurityAuthentication(context);
    context.setHeaderParam('User-Agent', userAgent);
  };
  return identified;
}
