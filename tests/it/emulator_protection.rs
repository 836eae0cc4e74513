//! Who may edit what in the emulator, as at Google: the spreadsheet's owner (a person),
//! other people with tokens of their own, sheetq's service account; and the protected
//! ranges that stop everyone but their editors and the owner.

use serde_json::{json, Value as Json};
use sheetq::emulator::{Access, Emulator, EmulatorOptions, DEFAULT_OWNER};

use crate::support::{self, hub, ok, SCOPE};

const ALICE: &str = "alice@example.com";

/// A token for `email` from `POST /_emulator/people/token`, as a person's script would get
/// one; panics (with the reply) unless it is issued.
async fn token_for(emu: &Emulator, email: &str) -> String {
    let (status, reply) = support::raw(
        emu,
        "POST",
        "/_emulator/people/token",
        Some(json!({ "email": email })),
        None,
    )
    .await;
    assert_eq!(status, 200, "a token for {email}: {reply}");
    reply["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no access_token in {reply}"))
        .to_string()
}

/// `values.get` of `range` with `token`: status and body.
async fn read_as(emu: &Emulator, token: &str, range: &str) -> (u16, Json) {
    let path = format!(
        "v4/spreadsheets/{}/values/{}",
        emu.spreadsheet_id(),
        utf8(range)
    );
    support::raw(emu, "GET", &path, None, Some(token)).await
}

/// A range as it goes into a URL path.
fn utf8(range: &str) -> String {
    percent_encoding::utf8_percent_encode(range, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[tokio::test]
async fn a_person_gets_a_token_of_their_own_and_the_api_knows_them_by_it() {
    let emu = support::start_emulator().await;
    let (status, reply) = support::raw(
        &emu,
        "POST",
        "/_emulator/people/token",
        Some(json!({ "email": "Alice@Example.com" })),
        None,
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["token_type"], "Bearer", "{reply}");
    assert_eq!(reply["expires_in"], 3600, "{reply}");
    let token = reply["access_token"].as_str().unwrap_or_default();
    let (status, body) = read_as(&emu, token, "'_ワーカー'!B1").await;
    assert_eq!(
        status, 200,
        "a person's token authenticates API calls: {body}"
    );
    assert_eq!(body["values"], json!([["free"]]));
    let call = emu
        .requests()
        .into_iter()
        .find(|r| r.method == "spreadsheets.values.get")
        .unwrap_or_else(|| panic!("the read is not in the request log"));
    assert_eq!(
        call.user, ALICE,
        "the call is logged (and its quota counted) as the person, by their address"
    );

    // The handle issues the same kind of token without HTTP.
    let bob = emu.person_token("bob@example.com");
    let (status, body) = read_as(&emu, &bob, "'_ワーカー'!B1").await;
    assert_eq!(status, 200, "{body}");
    let users: Vec<String> = emu.requests().into_iter().map(|r| r.user).collect();
    assert!(
        users.iter().any(|u| u == "bob@example.com"),
        "bob's read is his: {users:?}"
    );

    for (body, why) in [
        (json!({ "email": "alice" }), "an address without '@'"),
        (
            json!({ "email": "alice@example" }),
            "a domain without a dot",
        ),
        (json!({ "mail": ALICE }), "no email key"),
        (
            json!({ "email": Emulator::account("robot") }),
            "a service account's address",
        ),
    ] {
        let (status, reply) =
            support::raw(&emu, "POST", "/_emulator/people/token", Some(body), None).await;
        assert_eq!(status, 400, "{why} must be refused: {reply}");
        assert_eq!(
            reply["error"]["status"], "INVALID_ARGUMENT",
            "{why}: {reply}"
        );
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("alice@example.com") || message.contains("credentials"),
            "{why}: the message says what to send instead: {message}"
        );
    }

    // Sharing applies to people as to service accounts.
    emu.share(ALICE, Access::None);
    let (status, body) = read_as(&emu, token, "'_ワーカー'!B1").await;
    assert_eq!(status, 403, "a person the file is not shared with: {body}");
    assert_eq!(body["error"]["status"], "PERMISSION_DENIED", "{body}");
}

#[tokio::test]
async fn the_owner_is_a_person_who_always_has_the_file() {
    let emu = support::start_emulator().await;
    assert_eq!(emu.owner(), DEFAULT_OWNER);
    assert!(
        !emu.owner().ends_with(".gserviceaccount.com"),
        "the seeded spreadsheet is a person's, shared with the service account"
    );
    let owner = token_for(&emu, &emu.owner()).await;
    emu.share(&emu.owner(), Access::Reader);
    let path = format!(
        "v4/spreadsheets/{}/values/{}?valueInputOption=RAW",
        emu.spreadsheet_id(),
        utf8("'サーバーA'!F8")
    );
    let (status, body) = support::raw(
        &emu,
        "PUT",
        &path,
        Some(json!({ "values": [["by the owner"]] })),
        Some(&owner),
    )
    .await;
    assert_eq!(
        status, 200,
        "sharing cannot take the file from its owner: {body}"
    );

    // A spreadsheet made through the API belongs to the account that made it.
    let hub = hub(&emu).await;
    let made = ok(
        "spreadsheets.create",
        hub.spreadsheets()
            .create(Default::default())
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let id = made.spreadsheet_id.unwrap_or_default();
    let owner_of_made = emu.with_store(|s| s.get(&id).map(|ss| ss.owner.clone()));
    assert_eq!(
        owner_of_made.ok().as_deref(),
        Some("sheetq-emulator@sheetq-emulator.iam.gserviceaccount.com")
    );
}

#[tokio::test]
async fn the_owner_given_at_start_is_kept_in_the_state_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let state = dir.path().join("state.json");
    let first = support::start_with(EmulatorOptions {
        state: Some(state.clone()),
        owner: Some("carol@example.com".into()),
        ..EmulatorOptions::default()
    })
    .await;
    assert_eq!(first.owner(), "carol@example.com");
    first
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("shutdown: {e}"));
    let again = support::start_with(EmulatorOptions {
        state: Some(state),
        ..EmulatorOptions::default()
    })
    .await;
    assert_eq!(
        again.owner(),
        "carol@example.com",
        "a restart without --owner keeps the owner the state file names"
    );
}
