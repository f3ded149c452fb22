// libpq, PostgreSQL's client library (Debian's libpq-dev), for the sync server's storage.
#include <libpq-fe.h>
