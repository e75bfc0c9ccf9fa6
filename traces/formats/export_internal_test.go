package formats

// SessionGroups is sessionGroups for the external tests, which compare
// traces session by session.
var SessionGroups = sessionGroups
