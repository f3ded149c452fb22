#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

// Macros of libssl in a form Swift can call.
static inline long tls_context_require_tls13(SSL_CTX *context) {
    return SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION);
}
static inline long tls_set_server_name(SSL *session, const char *name) {
    return SSL_set_tlsext_host_name(session, name);
}
