package core

// CodeInvalidCursor answers a list cursor this deployment did not hand out
// for that listing (400): malformed, edited, or made for another listing.
// Such a cursor is refused before anything is read.
const CodeInvalidCursor = "invalid_cursor"

// InvalidCursor is the refusal of a bad list cursor.
func InvalidCursor(why string) error {
	return &ValidationError{Code: CodeInvalidCursor, Field: "cursor", Message: "the cursor is not one this listing handed out: " + why}
}
