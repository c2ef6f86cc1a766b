import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { Middleware } from 'openapi-fetch';
import { OpenApiContract } from '../../helpers/openapi-contract.js';

/**
 * Checks every response a client receives against openapi.yaml (through OpenApiContract, the same
 * check the contract test runs): the status must be declared for that operation, the content type must
 * be the declared one, the body must match the declared schema with no property the schema does not
 * name, and the API's headers must be declared. Any difference fails the call, so a test that drives
 * the API through this middleware fails whenever the server and the document disagree.
 */
export class SpecValidator {
  private readonly contract: OpenApiContract;

  constructor(openApiPath: string) {
    this.contract = new OpenApiContract(openApiPath);
  }

  /** A validator for a component schema by name, e.g. `Problem`. */
  component(name: string): ValidateFunction {
    return this.contract.component(name);
  }

  middleware(): Middleware {
    return {
      onResponse: async ({ request, response }) => {
        const url = new URL(request.url);
        this.contract.check({
          method: request.method,
          url: url.pathname,
          status: response.status,
          headers: response.headers,
          body: await response.clone().text(),
        });
        return response;
      },
    };
  }
}
