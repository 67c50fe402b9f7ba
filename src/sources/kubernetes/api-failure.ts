/**
 * A failed request to the Kubernetes API, as a value: the module lives in the store layer
 * (store/kubernetes/api-failure.ts), whose cluster tier talks to the same API server and may not
 * import from the sources above it; the sources read it from there, through this name.
 */
export * from '../../store/kubernetes/api-failure.ts';
