//! The dashboard as a person uses it: headless Chromium, driven through
//! WebDriver (chromedriver), on `tq serve` of a seeded file. Skipped, with
//! the reason printed, only where chromedriver is missing and CI is not
//! set; in CI a missing browser fails the test. With
//! TQ_UPDATE_SCREENSHOTS=1 the screenshots also go to docs/ for the README.

mod serving;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;
use serving::{Seeded, Served};
use tq::{PullOptions, PushOptions, TaskState};

/// How long to wait for the page to show what it should (a bound on the
/// wait, never an assertion about speed).
const PATIENCE: Duration = Duration::from_secs(20);

/// chromedriver on a free loopback port, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    /// Starts chromedriver, or says why it cannot and returns `None`
    /// (outside CI only).
    fn start() -> Option<Driver> {
        let driver = std::env::var("TQ_CHROMEDRIVER").unwrap_or("/usr/bin/chromedriver".to_owned());
        if !Path::new(&driver).exists() || !Path::new(&chromium()).exists() {
            let why = format!(
                "{driver} or {} is missing (Debian: apt-get install chromium chromium-driver)",
                chromium()
            );
            if std::env::var_os("CI").is_some() {
                panic!("the browser tests must run in CI: {why}");
            }
            eprintln!("skipped: {why}");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..200 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(Driver {
                    child,
                    url: format!("http://127.0.0.1:{port}"),
                });
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("chromedriver did not listen on port {port}");
    }

    async fn client(&self) -> Client {
        self.client_of(json!({
            "binary": chromium(),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1200,760"],
        }))
        .await
    }

    /// A browser as a phone shows pages: 390 by 844 CSS pixels, with the
    /// page's viewport meta tag applied.
    async fn phone(&self) -> Client {
        self.client_of(json!({
            "binary": chromium(),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            "mobileEmulation": {"deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3.0}},
        }))
        .await
    }

    async fn client_of(&self, chrome_options: serde_json::Value) -> Client {
        let capabilities = json!({ "goog:chromeOptions": chrome_options });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn chromium() -> String {
    std::env::var("TQ_CHROMIUM").unwrap_or("/usr/bin/chromium".to_owned())
}

/// Saves a screenshot under target/, and into docs/ when asked to.
fn save_screenshot(png: &[u8], name: &str) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let shots = root.join("target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    std::fs::write(shots.join(name), png).unwrap();
    if std::env::var_os("TQ_UPDATE_SCREENSHOTS").is_some() {
        std::fs::write(root.join("docs").join(name), png).unwrap();
    }
}

/// Waits until the element `css` reads `want`, and fails with what it
/// read last. After a click that navigates, the old page's element can be
/// found and then go stale, or the new page can still be loading: both
/// are read again, not failed on.
async fn wait_for_text(client: &Client, css: &str, want: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    for _ in 0..(PATIENCE.as_millis() / 100) {
        if let Ok(element) = client.find(Locator::Css(css)).await {
            if let Ok(text) = element.text().await {
                if want(text.trim()) {
                    return text;
                }
                last = text;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{css} reads {last:?}");
}

/// Waits until `css` reads exactly `want`.
async fn wait_for(client: &Client, css: &str, want: &str) {
    wait_for_text(client, css, |text| text == want).await;
}

/// Waits until the cell of `queue`'s `field` on the overview reads `want`.
async fn wait_for_cell(client: &Client, queue: &str, field: &str, want: &str) {
    let css = format!("td[data-queue='{queue}'][data-field='{field}']");
    wait_for(client, &css, want).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_person_sees_the_counts_opens_a_dead_task_and_retries_it() {
    let Some(driver) = Driver::start() else {
        return;
    };
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions"]);
    let client = driver.client().await;

    // Actions need the token the server printed: its link sets the
    // cookie and leads to the overview.
    let token = served.token.as_deref().unwrap();
    client
        .goto(&served.url(&format!("/?token={token}")))
        .await
        .unwrap();
    wait_for_cell(&client, "emails", "pending", "3").await;
    wait_for_cell(&client, "emails", "dead", "1").await;
    wait_for_cell(&client, "default", "pending", "2").await;
    // The overview follows the file without being reloaded.
    client
        .execute("document.body.dataset.sameDocument = 'yes'", vec![])
        .await
        .unwrap();
    seeded
        .queue("emails")
        .push("{\"to\":\"new@example.com\"}", &PushOptions::new())
        .unwrap();
    wait_for_cell(&client, "emails", "pending", "4").await;
    let same_document = client
        .execute("return document.body.dataset.sameDocument", vec![])
        .await
        .unwrap();
    assert_eq!(same_document, "yes", "the page was reloaded");
    save_screenshot(
        &client.screenshot().await.unwrap(),
        "dashboard-overview.png",
    );

    client
        .find(Locator::Css("td[data-queue='emails'][data-field='dead'] a"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&client, "td.reason", serving::DEAD_REASON).await;
    client
        .find(Locator::LinkText("1"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&client, "#state", "dead").await;
    wait_for_text(&client, "pre.payload", |text| {
        text.contains("\"template\": \"welcome\"")
    })
    .await;
    save_screenshot(&client.screenshot().await.unwrap(), "dashboard-task.png");

    client
        .find(Locator::Css("button[data-action='retry']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&client, "#state", "pending").await;
    assert_eq!(seeded.queue("emails").count(TaskState::Dead).unwrap(), 0);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn read_only_pages_have_no_buttons_and_refuse_forged_and_cross_site_posts() {
    let Some(driver) = Driver::start() else {
        return;
    };
    let seeded = Seeded::new();
    let read_only = Served::start(&seeded.file, &[]);
    let client = driver.client().await;

    client
        .goto(&read_only.url("/tasks/1?queue=emails"))
        .await
        .unwrap();
    wait_for(&client, "#state", "dead").await;
    wait_for_text(&client, "#read-only", |text| text.contains("read-only")).await;
    assert!(client
        .find_all(Locator::Css("button, form"))
        .await
        .unwrap()
        .is_empty());
    // A POST forged from the page itself is refused.
    let forged = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('/queues/emails/actions/retry', {method: 'POST', body: new URLSearchParams({id: '1'})})
               .then((response) => done(response.status));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(forged, 403);

    // A page of another site posts a form to a dashboard with actions
    // allowed, with the right CSRF token even: refused.
    let allowed = Served::start(&seeded.file, &["--allow-actions"]);
    let token = allowed.token.as_deref().unwrap();
    client
        .goto(&allowed.url(&format!("/?token={token}")))
        .await
        .unwrap();
    client
        .goto(&allowed.url("/tasks/1?queue=emails"))
        .await
        .unwrap();
    let csrf = client
        .find(Locator::Css("input[name='csrf']"))
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .unwrap();
    let target = allowed.url("/queues/emails/actions/retry");
    let attack = format!(
        "<form method=post action='{target}'><input name=csrf value='{csrf}'><input name=id value=1>\
         <input name=next value='/api/tasks/1'></form><script>document.forms[0].submit()</script>"
    );
    let attack = percent_encoding::utf8_percent_encode(&attack, percent_encoding::NON_ALPHANUMERIC);
    client
        .goto(&format!("data:text/html,{attack}"))
        .await
        .unwrap();
    let mut answer = String::new();
    for _ in 0..(PATIENCE.as_millis() / 100) {
        answer = client.source().await.unwrap();
        if answer.contains("refused")
            || answer.contains("token is required")
            || answer.contains("\"state\"")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The token's cookie (SameSite=Strict) does not go with a POST from
    // another site, so the token check may refuse it before the origin
    // check does.
    assert!(
        answer.contains("cross-site request refused") || answer.contains("a token is required"),
        "{answer}"
    );
    assert_eq!(seeded.queue("emails").count(TaskState::Dead).unwrap(), 1);
    client.close().await.unwrap();
}

/// The pages every dashboard has, for a file seeded by [`Seeded::new`].
const EVERY_PAGE: [&str; 9] = [
    "/",
    "/queues/emails",
    "/queues/emails?state=dead",
    "/queues/emails/dead",
    "/tasks/1?queue=emails",
    "/schedules",
    "/queues/emails/scheduled",
    "/queues/emails/retrying",
    "/workers",
];

/// Checks the page `client` shows at `path`: the navigation bar leads to
/// the overview and every queue and shows tq's version, nothing is wider
/// than the window, and each state's colour is the one `colours` holds
/// for it (recorded from the first page that shows it).
async fn check_page(
    client: &Client,
    path: &str,
    colours: &mut std::collections::BTreeMap<String, String>,
) {
    wait_for_text(client, "nav.site", |text| text.contains("emails")).await;
    let version = client
        .find(Locator::Css("header .version"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(version, format!("v{}", env!("CARGO_PKG_VERSION")), "{path}");
    let mut links = Vec::new();
    for link in client.find_all(Locator::Css("nav.site a")).await.unwrap() {
        links.push(link.attr("href").await.unwrap().unwrap());
    }
    for want in ["/", "/queues/default", "/queues/emails"] {
        assert!(links.iter().any(|link| link == want), "{path}: {links:?}");
    }
    let widths = client
        .execute(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]",
            vec![],
        )
        .await
        .unwrap();
    let (scroll, client_width) = (widths[0].as_u64().unwrap(), widths[1].as_u64().unwrap());
    assert!(
        scroll <= client_width,
        "{path} is {scroll} px wide in a window of {client_width}"
    );
    let shown = client
        .execute(
            "return [...document.querySelectorAll('[data-state]')].map((element) =>
               [element.dataset.state, getComputedStyle(element).backgroundColor])",
            vec![],
        )
        .await
        .unwrap();
    for pair in shown.as_array().unwrap() {
        let (state, colour) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        let recorded = colours.entry(state.to_owned()).or_insert(colour.to_owned());
        assert_eq!(recorded, colour, "{path}: {state}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn every_page_has_the_navigation_bar_and_fits_a_laptop_and_a_phone() {
    let Some(driver) = Driver::start() else {
        return;
    };
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let mut colours = std::collections::BTreeMap::new();
    for (client, size) in [
        (driver.client().await, Some((1280, 800))),
        (driver.phone().await, None),
    ] {
        if let Some((width, height)) = size {
            client.set_window_size(width, height).await.unwrap();
        }
        for path in EVERY_PAGE {
            client.goto(&served.url(path)).await.unwrap();
            check_page(&client, path, &mut colours).await;
        }
        if size.is_none() {
            client.goto(&served.url("/queues/emails")).await.unwrap();
            wait_for_text(&client, "nav.site", |text| text.contains("emails")).await;
            save_screenshot(&client.screenshot().await.unwrap(), "dashboard-phone.png");
        }
        client.close().await.unwrap();
    }
    for state in ["pending", "dead"] {
        assert!(
            colours.contains_key(state),
            "no page shows {state}: {colours:?}"
        );
    }
    assert_ne!(colours["pending"], colours["dead"]);
}

/// Marks the document the browser shows, for [`same_document`] to tell
/// whether it was reloaded since.
async fn mark_document(client: &Client) {
    client
        .execute("document.body.dataset.sameDocument = 'yes'", vec![])
        .await
        .unwrap();
}

async fn same_document(client: &Client) -> bool {
    client
        .execute("return document.body.dataset.sameDocument", vec![])
        .await
        .unwrap()
        == "yes"
}

#[tokio::test(flavor = "current_thread")]
async fn queue_and_task_pages_follow_the_file_and_keep_what_is_typed() {
    let Some(driver) = Driver::start() else {
        return;
    };
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let client = driver.client().await;

    client.goto(&served.url("/queues/emails")).await.unwrap();
    wait_for(&client, "nav.states a.current .count", "3").await;
    mark_document(&client).await;
    let search = client
        .find(Locator::Css("form.search input[name='id']"))
        .await
        .unwrap();
    search.send_keys("12").await.unwrap();
    seeded
        .queue("emails")
        .push("{\"to\":\"late@example.com\"}", &PushOptions::new())
        .unwrap();
    wait_for_text(&client, "table.tasks tbody", |text| {
        text.contains("late@example.com")
    })
    .await;
    wait_for(&client, "nav.states a.current .count", "4").await;
    assert!(
        same_document(&client).await,
        "the queue's page was reloaded"
    );
    let typed = client
        .find(Locator::Css("form.search input[name='id']"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap();
    assert_eq!(
        typed.as_deref(),
        Some("12"),
        "the half-typed search was lost"
    );

    // Task 2 is the first in line.
    client
        .goto(&served.url("/tasks/2?queue=emails"))
        .await
        .unwrap();
    wait_for(&client, "#state", "pending").await;
    mark_document(&client).await;
    let emails = seeded.queue("emails");
    let task = emails.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(task.id(), 2);
    wait_for(&client, "#state", "leased").await;
    emails.fail(task.receipt(), "smtp timeout").unwrap();
    wait_for(&client, "pre.reason", "smtp timeout").await;
    assert!(same_document(&client).await, "the task's page was reloaded");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_person_ticks_tasks_and_cancels_them_after_confirming_the_count() {
    let Some(driver) = Driver::start() else {
        return;
    };
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions"]);
    let client = driver.client().await;
    let token = served.token.as_deref().unwrap();
    client
        .goto(&served.url(&format!("/?token={token}")))
        .await
        .unwrap();
    client.goto(&served.url("/queues/emails")).await.unwrap();
    wait_for(&client, "nav.states a.current .count", "3").await;
    for id in [2, 3] {
        client
            .find(Locator::Css(&format!("input[name='id'][value='{id}']")))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }
    // The ticks outlive the list's refresh.
    seeded
        .queue("emails")
        .push("{\"to\":\"late@example.com\"}", &PushOptions::new())
        .unwrap();
    wait_for_text(&client, "table.tasks tbody", |text| {
        text.contains("late@example.com")
    })
    .await;
    for id in [2, 3] {
        let ticked = client
            .find(Locator::Css(&format!("input[name='id'][value='{id}']")))
            .await
            .unwrap()
            .prop("checked")
            .await
            .unwrap();
        assert_eq!(ticked.as_deref(), Some("true"), "task {id}'s tick was lost");
    }
    client
        .find(Locator::Css("button[data-action='cancel selected']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&client, "#confirm-count", "cancel 2 tasks of queue emails?").await;
    assert_eq!(seeded.queue("emails").count(TaskState::Pending).unwrap(), 4);
    client
        .find(Locator::Css("button[data-action='confirm']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&client, "nav.states a.current .count", "2").await;
    assert_eq!(seeded.queue("emails").count(TaskState::Pending).unwrap(), 2);
    client.close().await.unwrap();
}
