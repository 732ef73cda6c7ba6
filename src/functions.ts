// `baton-functions/functions`: Baton on an Azure Functions app. One call registers the coordinator
// timer, the workers, the HTTP API and page, the durable registrations and a shutdown hook on the
// app's own `app` from `@azure/functions`.
export { registerBaton } from './app/register-functions';
export type { FunctionsApp, RegisterBatonOptions, RegisteredBaton } from './app/register-functions';
export { blobServiceClient } from './app/app-storage';
export type { AppStorageOptions } from './app/app-storage';
