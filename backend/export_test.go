package backend

// Exports for the external tests (package backend_test), which drive
// S3Store through faults.FaultyHTTP: backend/faults imports backend, so
// those tests cannot live in package backend itself.

var (
	RandBytes    = randBytes
	ReadAllRange = readAllRange
	WantErr      = wantErr
)

// SetListPageSize makes s list in pages of n keys (0 = the server's
// default), so that paging is tested with few objects.
func SetListPageSize(s *S3Store, n int32) { s.listPageSize = n }
