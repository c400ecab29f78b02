package backend

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseRestoreHeader(t *testing.T) {
	exp := time.Date(2012, 12, 21, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want RestoreStatus
		bad  bool
	}{
		{"", RestoreStatus{}, false},
		{`ongoing-request="true"`, RestoreStatus{Requested: true, Ongoing: true}, false},
		{`ongoing-request="false", expiry-date="Fri, 21 Dec 2012 00:00:00 GMT"`, RestoreStatus{Requested: true, Expiry: exp}, false},
		{`ongoing-request="false",expiry-date="Fri, 21 Dec 2012 00:00:00 GMT"`, RestoreStatus{Requested: true, Expiry: exp}, false},
		{` ongoing-request = "false" ,	expiry-date="Fri, 21 Dec 2012 00:00:00 GMT" `, RestoreStatus{Requested: true, Expiry: exp}, false},
		{`expiry-date="Fri, 21 Dec 2012 00:00:00 GMT", ongoing-request="false"`, RestoreStatus{Requested: true, Expiry: exp}, false},
		{`Ongoing-Request="true"`, RestoreStatus{Requested: true, Ongoing: true}, false},
		{`ongoing-request="false"`, RestoreStatus{Requested: true}, false}, // Intelligent-Tiering: no expiry
		{`ongoing-request="true", expiry-date="Fri, 21 Dec 2012 00:00:00 GMT"`, RestoreStatus{Requested: true, Ongoing: true, Expiry: exp}, false},
		{`ongoing-request="false", restore-request-date="whatever, even, commas"`, RestoreStatus{Requested: true}, false}, // unknown name ignored
		// Errors.
		{`ongoing-request="yes"`, RestoreStatus{}, true},
		{`ongoing-request="TRUE"`, RestoreStatus{}, true},
		{`ongoing-request=true`, RestoreStatus{}, true},
		{`ongoing-request="true`, RestoreStatus{}, true},
		{`ongoing-request`, RestoreStatus{}, true},
		{`expiry-date="Fri, 21 Dec 2012 00:00:00 GMT"`, RestoreStatus{}, true}, // no ongoing-request
		{`ongoing-request="false", expiry-date="2012-12-21"`, RestoreStatus{}, true},
		{`ongoing-request="false", expiry-date="Fri, 21 Dec 2012 00:00:00 PST"`, RestoreStatus{}, true},
		{`ongoing-request="true", ongoing-request="false"`, RestoreStatus{}, true},
		{`ongoing-request="true",`, RestoreStatus{}, true},
		{`ongoing-request="true",,x="y"`, RestoreStatus{}, true},
		{`ongoing-request="true" x="y"`, RestoreStatus{}, true},
		{`="true"`, RestoreStatus{}, true},
		{`ongoing request="true"`, RestoreStatus{}, true},
		{`,ongoing-request="true"`, RestoreStatus{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRestoreHeader(tc.in)
			if tc.bad {
				if err == nil || !errors.Is(err, ErrBadResponse) {
					t.Fatalf("got %+v, %v; want an error wrapping ErrBadResponse", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestFormatRestoreHeader(t *testing.T) {
	exp := time.Date(2031, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	tests := []struct {
		in   RestoreStatus
		want string
	}{
		{RestoreStatus{}, ""},
		{RestoreStatus{Ongoing: true}, ""}, // not requested: no header
		{RestoreStatus{Requested: true, Ongoing: true}, `ongoing-request="true"`},
		{RestoreStatus{Requested: true, Expiry: exp}, `ongoing-request="false", expiry-date="Thu, 02 Jan 2031 02:04:05 GMT"`},
		{RestoreStatus{Requested: true}, `ongoing-request="false"`},
	}
	for _, tc := range tests {
		if got := FormatRestoreHeader(tc.in); got != tc.want {
			t.Errorf("FormatRestoreHeader(%+v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRestoreHeader: ParseRestoreHeader never panics; what it accepts
// formats to a value that parses back to the same status (expiry to the
// second, as HTTP dates carry it); and a formatted status always parses.
func FuzzRestoreHeader(f *testing.F) {
	for _, s := range []string{
		`ongoing-request="true"`,
		`ongoing-request="false", expiry-date="Fri, 21 Dec 2012 00:00:00 GMT"`,
		`ongoing-request="false",x="y,z"`,
		`a="", b="c"`,
		``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseRestoreHeader(s)
		if err != nil {
			if st != (RestoreStatus{}) {
				t.Fatalf("%q: error %v with a non-zero status %+v", s, err, st)
			}
			return
		}
		if (s == "") == st.Requested {
			t.Fatalf("%q: Requested %v", s, st.Requested)
		}
		back, err := ParseRestoreHeader(FormatRestoreHeader(st))
		if err != nil || back != st {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, st, FormatRestoreHeader(st), back, err)
		}
	})
}

func TestRestoreStatusDone(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		st   RestoreStatus
		want bool
	}{
		{RestoreStatus{}, false},
		{RestoreStatus{Requested: true, Ongoing: true}, false},
		{RestoreStatus{Requested: true}, true},
		{RestoreStatus{Requested: true, Expiry: now.Add(time.Second)}, true},
		{RestoreStatus{Requested: true, Expiry: now}, false},
		{RestoreStatus{Requested: true, Expiry: now.Add(-time.Hour)}, false},
	}
	for _, tc := range tests {
		if got := tc.st.Done(now); got != tc.want {
			t.Errorf("%+v.Done = %v, want %v", tc.st, got, tc.want)
		}
	}
}

func TestNeedsRestoreAndColdness(t *testing.T) {
	tests := []struct {
		class, tier string
		needs       bool
	}{
		{"", "", false},
		{ClassStandard, "", false},
		{"STANDARD_IA", "", false},
		{"ONEZONE_IA", "", false},
		{"REDUCED_REDUNDANCY", "", false},
		{ClassGlacierIR, "", false},
		{ClassIntelligentTiering, "", false},
		{ClassIntelligentTiering, TierArchiveAccess, true},
		{ClassIntelligentTiering, TierDeepArchiveAccess, true},
		{ClassGlacier, "", true},
		{ClassDeepArchive, "", true},
	}
	for _, tc := range tests {
		if got := NeedsRestore(tc.class, tc.tier); got != tc.needs {
			t.Errorf("NeedsRestore(%q, %q) = %v", tc.class, tc.tier, got)
		}
	}
	// The documented order, coldest last.
	order := [][2]string{
		{ClassStandard, ""}, {"EXPRESS_ONEZONE", ""}, {ClassIntelligentTiering, ""}, {"STANDARD_IA", ""},
		{ClassGlacierIR, ""}, {ClassIntelligentTiering, TierArchiveAccess}, {ClassGlacier, ""},
		{ClassIntelligentTiering, TierDeepArchiveAccess}, {ClassDeepArchive, ""},
	}
	for i := 1; i < len(order); i++ {
		a, b := order[i-1], order[i]
		if Coldness(a[0], a[1]) >= Coldness(b[0], b[1]) {
			t.Errorf("Coldness(%v) = %d, not below Coldness(%v) = %d", a, Coldness(a[0], a[1]), b, Coldness(b[0], b[1]))
		}
	}
	// Every class that needs a restore is colder than every one that does not.
	for _, x := range tests {
		for _, y := range tests {
			if x.needs && !y.needs && Coldness(x.class, x.tier) <= Coldness(y.class, y.tier) {
				t.Errorf("%v needs a restore but is not colder than %v", x, y)
			}
		}
	}
}

func TestCheckRestore(t *testing.T) {
	tests := []struct {
		class, tier string
		req         RestoreRequest
		bad         string // substring of the error, "" = valid
	}{
		{ClassGlacier, "", RestoreRequest{Days: 1, Tier: RetrievalExpedited}, ""},
		{ClassGlacier, "", RestoreRequest{Days: 7}, ""},
		{ClassGlacier, "", RestoreRequest{Days: 7, Tier: RetrievalBulk}, ""},
		{ClassGlacier, "", RestoreRequest{Days: 0}, "Days"},
		{ClassGlacier, "", RestoreRequest{Days: -1}, "Days"},
		{ClassGlacier, "", RestoreRequest{Days: MaxRestoreDays + 1}, "Days"},
		{ClassGlacier, "", RestoreRequest{Days: 1, Tier: "standard"}, "tier"},
		{ClassGlacier, "", RestoreRequest{Days: 1, Tier: "Fast"}, "tier"},
		{ClassDeepArchive, "", RestoreRequest{Days: 2, Tier: RetrievalStandard}, ""},
		{ClassDeepArchive, "", RestoreRequest{Days: 2, Tier: RetrievalBulk}, ""},
		{ClassDeepArchive, "", RestoreRequest{Days: 2, Tier: RetrievalExpedited}, "Expedited"},
		{ClassIntelligentTiering, TierArchiveAccess, RestoreRequest{Tier: RetrievalExpedited}, ""},
		{ClassIntelligentTiering, TierArchiveAccess, RestoreRequest{Days: 3}, "Days must not"},
		{ClassIntelligentTiering, TierDeepArchiveAccess, RestoreRequest{}, ""},
		{ClassIntelligentTiering, TierDeepArchiveAccess, RestoreRequest{Tier: RetrievalExpedited}, "Expedited"},
		{ClassStandard, "", RestoreRequest{Days: 1}, ""}, // not archived: the restore itself says so
		{"", "", RestoreRequest{}, ""},                   // class-independent checks only
		{"", "", RestoreRequest{Tier: "x"}, "tier"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s/%+v", tc.class, tc.tier, tc.req), func(t *testing.T) {
			err := CheckRestore(tc.class, tc.tier, tc.req)
			if tc.bad == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRestore) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("error %v, want ErrInvalidRestore mentioning %q", err, tc.bad)
			}
		})
	}
}

func TestArchivedErrorMessage(t *testing.T) {
	tests := []struct {
		e    ArchivedError
		want string
	}{
		{ArchivedError{StorageClass: ClassGlacier}, "archived in GLACIER and must be restored"},
		{ArchivedError{StorageClass: ClassIntelligentTiering, AccessTier: TierArchiveAccess}, "INTELLIGENT_TIERING (ARCHIVE_ACCESS)"},
		{ArchivedError{StorageClass: ClassDeepArchive, Restore: RestoreStatus{Requested: true, Ongoing: true}}, "a restore is in progress"},
		{ArchivedError{StorageClass: ClassDeepArchive, Restore: RestoreStatus{Requested: true}}, "expired"},
		{ArchivedError{}, "an archive class"},
	}
	for _, tc := range tests {
		err := error(&tc.e)
		if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrArchived) {
			t.Errorf("%+v: %q (Is ErrArchived %v), want it to mention %q", tc.e, err, errors.Is(err, ErrArchived), tc.want)
		}
	}
}
