#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro cast of -1 that Swift cannot import; give it a name Swift can use.
static inline sqlite3_destructor_type csqlite_transient(void) { return (sqlite3_destructor_type)-1; }
