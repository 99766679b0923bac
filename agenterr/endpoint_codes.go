package agenterr

// CodeEndpointUnconfirmed: a model endpoint that is neither a loopback
// address nor the provider's own host comes only from the user config
// file, which a model whose commands ran unsandboxed could have written;
// the user confirms it by giving it on the command line, in the
// environment or in agent.json.
const CodeEndpointUnconfirmed = "ENDPOINT_UNCONFIRMED"
