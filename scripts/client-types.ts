import openapiTS, { astToString } from 'openapi-typescript';

const HEADER = '// Generated from openapi.yaml by openapi-typescript (npm run openapi). Do not edit: regenerate.\n\n';

/** TypeScript types for openapi-fetch, generated from the OpenAPI document's text. */
export async function generateClientTypes(openApiYaml: string): Promise<string> {
  const ast = await openapiTS(openApiYaml, { alphabetize: false });
  return HEADER + astToString(ast);
}
