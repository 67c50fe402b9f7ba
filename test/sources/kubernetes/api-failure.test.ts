/**
 * A Kubernetes API failure keeps its Status' `details.causes`, so an expected refusal is told by
 * the cause the server gives (as client-go's `HasStatusCause`), never by the words of its message.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiException } from '@kubernetes/client-node';
import {
  failureOfError,
  failureOfResponse,
  failureOfStatus,
  hasStatusCause,
  isNamespaceTerminating,
} from '../../../src/sources/kubernetes/api-failure.ts';

/** The API server's NamespaceLifecycle refusal of a create in a namespace being deleted. */
const TERMINATING = {
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message:
    'events "web-1.1" is forbidden: unable to create new content in namespace shop because it is being terminated',
  reason: 'Forbidden',
  details: {
    name: 'web-1.1',
    kind: 'events',
    causes: [
      { reason: 'NamespaceTerminating', message: 'namespace shop is being terminated', field: 'metadata.namespace' },
    ],
  },
  code: 403,
};

describe('ApiFailure causes', () => {
  it("keeps the causes of a typed call's Status, and knows a namespace being deleted by them", () => {
    const failure = failureOfError(new ApiException(403, 'Forbidden', JSON.stringify(TERMINATING), {}));
    assert.equal(failure.code, 403);
    assert.deepEqual(failure.causes, TERMINATING.details.causes);
    assert.ok(isNamespaceTerminating(failure));
  });

  it("knows a namespace being deleted whatever the message says, from a body or a watch's ERROR event", () => {
    const reworded = { ...TERMINATING, message: 'Namespace "shop" wird gelöscht' };
    assert.ok(isNamespaceTerminating(failureOfResponse(403, JSON.stringify(reworded))));
    assert.ok(isNamespaceTerminating(failureOfStatus(reworded)));
  });

  it('does not take a message that merely says "being terminated" for a namespace being deleted', () => {
    const { details: _details, ...withoutCauses } = TERMINATING;
    const failure = failureOfResponse(403, JSON.stringify(withoutCauses));
    assert.equal(failure.causes, undefined);
    assert.equal(isNamespaceTerminating(failure), false);
  });

  it('keeps only well-formed causes and their string fields; a Status without a list has none', () => {
    const causes = [{ reason: 'FieldValueInvalid', field: 'spec.x', extra: 1 }, 'junk', null, { message: 7 }];
    const status = { code: 422, details: { causes } };
    assert.deepEqual(failureOfStatus(status).causes, [{ reason: 'FieldValueInvalid', field: 'spec.x' }, {}]);
    assert.equal(failureOfStatus({ code: 500, details: { causes: 'not a list' } }).causes, undefined);
    assert.equal(hasStatusCause(failureOfStatus(status), 'FieldValueInvalid'), true);
    assert.equal(hasStatusCause(failureOfStatus(status), 'NamespaceTerminating'), false);
  });
});
