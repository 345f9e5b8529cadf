package ledger

// OldID is oldID, for the external tests.
var OldID = oldID
